"""Split a ``python-sb`` command line the way CPython splits ``python``'s. Pure: no I/O.

``[sandbox options] [python options] (script | -m mod | -c cmd | -) [args...]``: options
end at the program, and everything after it belongs to the program. Single-letter options
may be glued (``-Im mod``, ``-mjson.tool``, ``-cprint(1)``, ``-Wdefault``).
"""

from __future__ import annotations

from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from pysandboxes._host.launchplan import LaunchRequest

#: CPython options that take no value.
FLAGS = frozenset("bBdEiIOqsSuvxPR")
#: CPython options that take a value, glued or as the next argument.
WITH_VALUE = frozenset("WX")
#: Long CPython options passed to the sandboxed interpreter as they are.
PYTHON_LONG = frozenset({"check-hash-based-pycs"})
#: Long CPython options that only print CPython's help.
PYTHON_HELP = frozenset({"help-env", "help-xoptions", "help-all"})


class UsageError(ValueError):
    """The command line cannot be understood; the message says why (exit status 2)."""


@record
class Invocation:
    """What a ``python-sb`` command line asks for.

    Attributes:
        action: ``run``, ``help``, ``version``, ``python-help``, ``show-rules``,
            ``show-layers``, ``replay``, ``explain`` or ``check``.
        kind: ``script``, ``module``, ``command``, ``stdin`` or ``interactive`` (no program:
            a prompt when standard input is a terminal, else its text is the program).
        target: the script, module or command.
        args: the program's arguments.
        python_flags: options for the sandboxed interpreter, e.g. ``("-u", "-W", "error")``.
        rules: ``--key=value`` sandbox options, as ``key=value`` rules.
        config: ``--pysandboxes-config``.
        learn: ``--learn[=FILE]``: ``None`` when absent, ``""`` for a bare ``--learn``.
        report: for ``show-layers``, ``table`` or ``json``.
        log: for ``replay``, the decision log to judge again.
        resource: for ``explain``, what to judge (a path, ``env:NAME``...).
    """

    action: str = "run"
    kind: str = "interactive"
    target: str = ""
    args: tuple[str, ...] = ()
    python_flags: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    config: str | None = None
    learn: str | None = None
    report: str = ""
    log: str = ""
    resource: str = ""

    def described(self) -> LaunchRequest:
        """The run this command line would start, for the commands that describe or judge
        it without starting it (``--show-layers``, ``--replay``, ``--explain``)."""
        from pysandboxes._host.launchplan import LaunchRequest
        from pysandboxes._wire.spec import Program

        kind = "repl" if self.kind == "interactive" else self.kind
        return LaunchRequest(
            program=Program(kind, self.target, self.args),
            config=self.config,
            extra_rules=self.rules,
        )


#: The options python-sb itself takes (the rest of ``--key`` are rules).
_OPTIONS = (
    "show-rules",
    "show-layers",
    "template",
    "learn",
    "pysandboxes-config",
    "help",
    "replay",
    "explain",
    "check",
)


def _keys() -> frozenset[str]:
    from pysandboxes._policy.parser import KNOWN_KEYS

    return frozenset(KNOWN_KEYS)


_KEYS = _keys()
#: Rule keys that always take a value: ``--key value`` means ``--key=value``.
_VALUED_KEYS = _KEYS - {"py-sandbox", "remote-result-guard", "learn", "quiet-refusals", "prompt"}


def _unknown_option(name: str) -> None:
    """``--name`` with no value is neither an option nor a rule: suggest the closest."""
    import difflib

    close = difflib.get_close_matches(name, [*_OPTIONS, *_KEYS], n=1, cutoff=0.6)
    hint = f": did you mean --{close[0]}?" if close else ""
    raise UsageError(f"unknown option --{name}{hint}")


def split(argv: Sequence[str]) -> Invocation:
    """Split ``argv`` (without the program name). Raises ``UsageError``."""
    flags: list[str] = []
    rules: list[str] = []
    config: str | None = None
    learn: str | None = None
    show = False
    layers = ""
    replay = ""
    resource: str | None = None
    check = False
    i = 0

    def result(**kwargs: object) -> Invocation:
        if layers and kwargs.get("action", "run") == "run":
            kwargs["action"] = "show-layers"
            kwargs["report"] = layers
        if show and kwargs.get("action", "run") == "run":
            kwargs["action"] = "show-rules"
        if replay and kwargs.get("action", "run") == "run":
            kwargs["action"] = "replay"
            kwargs["log"] = replay
        if resource is not None and kwargs.get("action", "run") == "run":
            kwargs["action"] = "explain"
            kwargs["resource"] = resource
        if check and kwargs.get("action", "run") == "run":
            kwargs["action"] = "check"
        return Invocation(
            python_flags=tuple(flags),
            rules=tuple(rules),
            config=config,
            learn=learn,
            **kwargs,  # type: ignore[arg-type]
        )

    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            if i < len(argv):
                return result(kind="script", target=argv[i], args=tuple(argv[i + 1 :]))
            return result()
        if arg == "-":
            return result(kind="stdin", target="-", args=tuple(argv[i:]))
        if arg.startswith("--"):
            name, equal, value = arg[2:].partition("=")
            if name == "help":
                return result(action="help")
            if name == "version":
                return result(action="version")
            if name in PYTHON_HELP:
                return result(action="python-help", target=f"--{name}")
            if name in ("pysandboxes-config", "replay", "explain", *PYTHON_LONG):
                if not equal:
                    if i >= len(argv):
                        raise UsageError(f"option --{name} needs a value")
                    value = argv[i]
                    i += 1
                if name == "pysandboxes-config":
                    config = value
                elif name == "replay":
                    replay = value
                elif name == "explain":
                    resource = value
                else:
                    flags.append(f"--{name}={value}")
            elif name == "learn":
                learn = value if equal else ""
            elif name == "show-rules" and not equal:
                show = True
            elif name == "check" and not equal:
                check = True
            elif name == "template" and not equal:
                return result(action="template")
            elif name == "show-layers":
                if value not in ("", "json"):
                    raise UsageError(f"--show-layers takes no value or =json, not '{value}'")
                layers = value or "table"
            elif not name:
                raise UsageError(f"invalid option '{arg}'")
            else:
                if not equal and name in _VALUED_KEYS and i < len(argv):
                    value = argv[i]  # --expose-ro ./data: the value is the next argument
                    i += 1
                elif not equal and name not in _KEYS and "." not in name:
                    _unknown_option(name)
                rules.append(f"{name}={value}")
            continue
        if arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                letter = arg[j]
                rest = arg[j + 1 :]
                if letter in "cm":
                    if not rest:
                        if i >= len(argv):
                            raise UsageError(f"Argument expected for the -{letter} option")
                        rest = argv[i]
                        i += 1
                    kind = "command" if letter == "c" else "module"
                    return result(kind=kind, target=rest, args=tuple(argv[i:]))
                if letter in WITH_VALUE:
                    if not rest:
                        if i >= len(argv):
                            raise UsageError(f"Argument expected for the -{letter} option")
                        rest = argv[i]
                        i += 1
                    flags += [f"-{letter}", rest]
                    break
                if letter in "h?":
                    return result(action="help")
                if letter == "V":
                    return result(action="version")
                if letter not in FLAGS:
                    raise UsageError(f"Unknown option: -{letter}")
                flags.append(f"-{letter}")
                j += 1
            continue
        return result(kind="script", target=arg, args=tuple(argv[i:]))
    return result()
