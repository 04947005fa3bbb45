"""Rule lines → ``Policy``: every key validated, every problem reported at once.

``parse_policy`` is the entry point. It never raises anything but ``ConfigSyntaxError``
for a bad configuration, whatever the input: each family validates its own values and
adds a ``ConfigIssue`` naming the offending text; the issues of every file are raised
together at the end.
"""

from __future__ import annotations

import os
import sys

from pysandboxes._policy import auditkeys, families, partialkeys
from pysandboxes._policy.builder import Builder
from pysandboxes._policy.expand import has_reference, with_runtime_variables
from pysandboxes._policy.families import FOREIGN_PROVIDERS as FOREIGN_PROVIDERS
from pysandboxes._policy.families import PROVIDER_OPTIONS as PROVIDER_OPTIONS
from pysandboxes._policy.families import PROVIDERS as PROVIDERS
from pysandboxes._policy.lines import LineReader, RawRule, expand_home
from pysandboxes._policy.model import (
    ARG_SOURCE,
    ApiRule,
    EvalRule,
    ExposeRule,
    NetRule,
    Origin,
    Policy,
    ResultClassRule,
    Setting,
)
from pysandboxes.errors import ConfigSyntaxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

    from pysandboxes._policy.netrules import Resolver

SINGLE_KEYS = (
    "os-sandbox",
    "py-sandbox",
    "learn",
    "remote-result-mode",
    "remote-result-guard",
    "port",
    "prompt",
)
LIST_KEYS = ("env", "unenv", "expose-ro", "expose-rw", "ignore", "net", "python-import")
KNOWN_KEYS = (
    *SINGLE_KEYS,
    *LIST_KEYS,
    "python-api",
    "include",
    "include-platform",
    *partialkeys.KEYS,
    *auditkeys.KEYS,
)
_TRUE = ("true", "1", "on", "yes", "")
_FALSE = ("false", "0", "off", "no", "none")
_RESULT_MODES = {
    "values": "values",
    "data-only": "values",
    "data_only": "values",
    "default": "values",
    "objects": "objects",
}
DEFAULT_RULE_FILE = ".py-sandboxes"


def parse_policy(
    main: str | None,
    *,
    extra_rules: Sequence[str] = (),
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    platform: str = sys.platform,
    resolve_host: Resolver | None = None,
) -> Policy:
    """Read the rules: ``extra_rules`` (command line, API) first, then ``main`` and includes.

    Args:
        main: the rule file (or a ``pyproject.toml``), or ``None`` for extra rules only.
        extra_rules: ``key=value`` lines given outside any file, shown as ``<arg>``.
        cwd: the directory ``<arg>`` paths resolve against; the process cwd by default.
        env: the host environment for ``${VAR}``; ``os.environ`` by default.
        platform: the platform name ``include-platform=`` compares with.
        resolve_host: resolves a ``net=`` hostname to addresses (pinned for the sandbox).

    Raises:
        ConfigSyntaxError: with every problem of every file, sorted by file and line.
    """
    cwd = os.path.abspath(cwd if cwd is not None else os.getcwd())
    host_env = with_runtime_variables(os.environ if env is None else env)
    reader = LineReader(cwd, host_env, platform, _pyproject_rule_lines)
    builder = Builder(cwd, host_env, resolve_host)
    raw = list(reader.extra(list(extra_rules)))
    if main is not None:
        raw.extend(reader.file(main))
    for rule in raw:
        _dispatch(builder, rule)
    builder.issues.extend(reader.issues)
    policy = _assemble(builder, reader.files)
    if builder.issues:
        raise ConfigSyntaxError(builder.issues)
    return policy


def _pyproject_rule_lines(text: str) -> list[tuple[int, str]] | None:
    # Imported here: tomlkit is only needed when the rules live in pyproject.toml.
    from pysandboxes._policy.pyproject import pyproject_rule_lines

    return pyproject_rule_lines(text)


def _dispatch(builder: Builder, rule: RawRule) -> None:
    key = rule.key
    if key in SINGLE_KEYS:
        _single(builder, rule)
    elif key in ("env", "unenv"):
        families.env_rule(builder, rule)
    elif key in ("expose-ro", "expose-rw"):
        families.expose_rule(builder, rule)
    elif key == "ignore":
        families.ignore_rule(builder, rule)
    elif key == "net":
        value = builder.expanded(rule)
        if value is not None:
            from pysandboxes._policy import netrules  # only files with net= rules pay for ipaddress

            resolve = builder.resolve_host or netrules.system_resolver
            netrules.parse_net(builder, rule.origin, value, resolve)
    elif key == "python-import":
        families.import_rule(builder, rule)
    elif key == "python-api":
        families.api_rule(builder, rule)
    elif key in partialkeys.KEYS:
        partialkeys.parse(builder, rule)
    elif key in auditkeys.KEYS:
        auditkeys.parse(builder, rule)
    elif key.startswith("eval-"):
        value = builder.expanded(rule)
        if value is not None:
            from pysandboxes._policy import evalkeys

            evalkeys.parse_eval(builder, rule.origin, key, value)
    elif "." in key:
        families.provider_option(builder, rule)
    else:
        _unknown(builder, rule)
    if rule.via_arg and key != "learn":
        builder.extra.append(rule.origin)


def _unknown(builder: Builder, rule: RawRule) -> None:
    key = rule.key
    hint = ""
    stripped = key.strip()
    if stripped != key:
        hint = f" (no spaces around '=': write '{stripped}=...')"
    else:
        close = families.close_matches(key.lower(), KNOWN_KEYS, n=1, cutoff=0.6)
        if close:
            hint = f": did you mean '{close[0]}'?"
    builder.issue(rule.origin, f"unknown key '{key}' in '{rule.origin.text}'{hint}")


def _truthy(builder: Builder, rule: RawRule, value: str) -> bool | None:
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    builder.issue(rule.origin, f"'{rule.key}={value}': expected true or false")
    return None


def _single(builder: Builder, rule: RawRule) -> None:
    value = builder.expanded(rule)
    if value is None:
        return
    key, origin = rule.key, rule.origin
    parsed: object = None
    if key == "learn":
        if value.lower() == "false":
            if origin.source == ARG_SOURCE:
                builder.issue(origin, "learn=false locks the rules: write it in a rule file")
            elif builder.lock is None:
                builder.lock = origin
            return
        if not value and has_reference(rule.value):
            return  # learn=${VAR} with VAR unset: no learning, as env= leaves it absent
        parsed = _learn_path(builder, rule, value)
    elif key == "os-sandbox":
        # One provider, or several in order of preference: the later ones are the
        # user's consent to a weaker layer where the first cannot run.
        choices = [part.strip().lower() for part in value.split(",")]
        for choice in choices:
            if choice not in PROVIDERS:
                close = families.close_matches(choice, PROVIDERS, n=1)
                hint = f" Did you mean '{close[0]}'?" if close else ""
                builder.issue(
                    origin,
                    f"os-sandbox '{choice}' is unknown: use one of {', '.join(PROVIDERS)}.{hint}",
                )
                return
        if len(set(choices)) != len(choices):
            builder.issue(origin, f"os-sandbox '{value}' names a provider twice")
            return
        parsed = ", ".join(choices)
    elif key in ("py-sandbox", "remote-result-guard"):
        parsed = _truthy(builder, rule, value)
    elif key == "remote-result-mode":
        parsed = _RESULT_MODES.get(value.lower())
        if parsed is None:
            builder.issue(
                origin, f"'{origin.text}': expected values (also spelled data-only) or objects"
            )
    elif key == "prompt":
        # prompt=tty (--prompt): refusals become questions on the terminal (docs/prompts.md)
        parsed = "tty" if value.lower() in ("", "tty") else None
        if value.lower() in _FALSE:
            parsed = "off"
        if parsed is None:
            builder.issue(origin, f"'{origin.text}': expected tty or off")
    elif key == "port":
        if not value.isdigit():
            builder.issue(origin, f"'{origin.text}': the port must be a number ≥ 0")
        else:
            builder.warn(origin, "port= has no effect: the sandbox talks over a socket pair")
        return
    if parsed is not None:
        builder.singles.setdefault(key, []).append((parsed, origin))


def _learn_path(builder: Builder, rule: RawRule, value: str) -> str | None:
    if value.lower() in ("true", "0", "1", "yes", "no", "on", "off"):
        builder.issue(rule.origin, f"'{rule.origin.text}': learn= takes the file to write")
        return None
    home = expand_home(value or DEFAULT_RULE_FILE, builder.env)
    if home is None:
        builder.issue(rule.origin, f"'{rule.origin.text}': cannot expand '~': no home directory")
        return None
    path = os.path.normpath(os.path.join(rule.base, home))
    if not os.path.isdir(os.path.dirname(path)):
        builder.issue(rule.origin, f"'{rule.origin.text}': the directory of '{path}' must exist")
        return None
    return path


def _assemble(builder: Builder, files: Iterable[str]) -> Policy:
    singles = {key: _one(builder, key, values) for key, values in builder.singles.items()}
    if builder.lock is not None:
        lock = builder.lock
        for origin in builder.extra:
            builder.issue(
                lock, f"'learn=false' locks the rules: the command line cannot add '{origin.text}'"
            )
        learn = singles.get("learn")
        if learn is not None:
            builder.issue(
                lock, f"learning is locked by learn=false, but requested by {learn.origin}"
            )
    lists = builder.lists
    expose = _merge_exposures(builder, lists.get("expose", []))
    families.links_in_writable_exposures(builder, lists.get("expose-links", []), expose)
    net: list[NetRule] = lists.get("net", [])
    evals: list[EvalRule] = lists.get("eval", [])
    api: list[ApiRule] = lists.get("api", [])
    if evals:
        from pysandboxes._policy import evalkeys

        evalkeys.check_dynamic_code_grant(builder, evals, api)
        from pysandboxes._policy.evaluation import warn_wide

        warn_wide(builder, evals)
    mode = singles.get("remote-result-mode")
    classes: list[ResultClassRule] = lists.get("result-classes", [])
    partialkeys.check(builder, classes, mode is not None and mode.value == "objects")
    return Policy(
        expose=tuple(expose),
        ignore=tuple(lists.get("ignore", [])),
        env=tuple(lists.get("env", [])),
        unenv=tuple(lists.get("unenv", [])),
        net=tuple(net),
        imports=tuple(lists.get("imports", [])),
        api=tuple(api),
        eval=tuple(evals),
        provider_options=tuple(lists.get("provider", [])),
        py_sandbox=singles.get("py-sandbox"),
        os_sandbox=singles.get("os-sandbox"),
        remote_result_mode=singles.get("remote-result-mode"),
        remote_result_guard=singles.get("remote-result-guard"),
        result_classes=tuple(classes),
        sandbox_timeout=singles.get("sandbox-timeout"),
        sandbox_memory=singles.get("sandbox-memory"),
        sandbox_open_files=singles.get("sandbox-open-files"),
        sandbox_processes=singles.get("sandbox-processes"),
        audit_log=singles.get("audit-log"),
        audit_log_level=singles.get("audit-log-level"),
        quiet_refusals=singles.get("quiet-refusals"),
        prompt=singles.get("prompt"),
        learn=singles.get("learn"),
        learn_lock=builder.lock,
        rule_files=tuple(files),
        pins=_pins(lists.get("pins", [])),
        warnings=tuple(builder.warnings),
    )


def _pins(pins: list[tuple[str, tuple[str, ...]]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not pins:
        return ()
    from pysandboxes._policy.netrules import merge_pins

    return tuple(sorted(merge_pins(pins)))


def _one(builder: Builder, key: str, values: list[tuple[Any, Origin]]) -> Setting[Any] | None:
    """A single-valued key: a command-line value wins; in files it may appear once."""
    given = [v for v in values if v[1].source == ARG_SOURCE]
    if given:
        value, origin = given[-1]
        return Setting(value, origin)
    if len(values) > 1:
        places = ", ".join(o.where for _, o in values[:-1]) + f" and {values[-1][1].where}"
        builder.issue(values[-1][1], f"{key} is set more than once ({places}): keep one")
    value, origin = values[0]
    return Setting(value, origin)


def _merge_exposures(builder: Builder, rules: list[ExposeRule]) -> list[ExposeRule]:
    by_path: dict[str, ExposeRule] = {}
    for rule in rules:
        seen = by_path.get(rule.path)
        if seen is None:
            by_path[rule.path] = rule
        elif seen.writable != rule.writable:
            builder.issue(
                rule.origin,
                f"'{rule.origin.text}' contradicts {seen.origin}: '{rule.path}' cannot be "
                "both read-only and read-write",
            )
    return list(by_path.values())
