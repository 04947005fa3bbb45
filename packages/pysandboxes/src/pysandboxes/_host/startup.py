"""Places whose code runs before the walls, or outside them: the sandbox may not write them.

A file the sandbox writes where code is loaded from at start-up runs, on the next run,
where no rule holds: a library named by ``LD_PRELOAD`` before Python starts, a ``.pth``
file of the user's site before the guards, a module or ``.pth`` file where python-sb's own
interpreter imports from in the trusted launcher and waiter. Rules that would let the
sandbox write there are refused before anything starts (or, for the user's site, that
site is not read). So are, with ``py-sandbox=false``, rules that let it rewrite a rule
file, which rules the next run: only the Python layer keeps those read-only.
"""

from __future__ import annotations

import os
import sys

from pysandboxes._policy.pathnames import within
from pysandboxes.errors import ConfigIssue, ConfigRefusedError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from pysandboxes._policy.model import Policy

#: Variables with which the C library loads or reads code named by a path, before Python.
LOADER_VARIABLES = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "LOCPATH")


def _writable(path: str, policy: Policy, tempdir: str, *, below: bool = False) -> bool:
    """Whether the sandbox may write ``path``; ``below``: or anywhere inside it."""
    real = os.path.realpath(path)
    places = [tempdir, *(rule.path for rule in policy.expose if rule.writable)]
    if below and any(within(os.path.realpath(p), real) for p in places):
        return True
    return any(within(real, p) for p in places)


#: Variables whose entries are directories: an empty entry is the working directory.
_DIRECTORY_LISTS = frozenset({"LD_LIBRARY_PATH", "GCONV_PATH", "LOCPATH"})


def _loader_places(name: str, value: str, cwd: str) -> list[str]:
    """The places the loader would read for ``name=value``, as it reads them.

    An empty entry of a directory list is the working directory, and a relative entry is
    read from it (``LD_LIBRARY_PATH=:/opt/lib``, from ``export V=$V:/opt/lib`` with ``V``
    unset, searches the working directory first); ``$ORIGIN`` is the interpreter's
    directory. A bare name in ``LD_PRELOAD`` or ``LD_AUDIT`` is a library the loader looks
    up in its search path, which the other variables describe. The loader's other tokens
    (``$PLATFORM``, ``$LIB``: ``x86_64``, ``lib64``...) may name any directory below the
    part before them: such an entry is returned as that part, ending in ``/$``, for the
    caller to refuse when the sandbox may write anywhere below it.
    """
    origin = os.path.dirname(os.path.realpath(sys.executable))
    places: list[str] = []
    separators = " :" if name == "LD_PRELOAD" else ":;" if name == "LD_LIBRARY_PATH" else ":"
    parts = [value]
    for separator in separators:
        parts = [piece for part in parts for piece in part.split(separator)]
    for part in parts:
        part = part.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
        if not part:
            if name in _DIRECTORY_LISTS and value:
                places.append(cwd)
            continue
        if name not in _DIRECTORY_LISTS and "/" not in part:
            continue  # a library name, looked up in the system's directories
        if "$" in part:  # $PLATFORM, ${LIB}...: a directory the loader chooses
            part = os.path.join(os.path.dirname(part.partition("$")[0]) or ".", "$")
        places.append(os.path.join(cwd, part))
    return places


def launcher_code_places(trees: list[str]) -> tuple[list[str], list[str]]:
    """Where this interpreter and the sandboxed one load code from, and the package
    directories of python-sb's own imports outside ``trees`` (see ``_launcher_issues``).

    The places: python-sb's import path (the script's directory, the standard library,
    ``site-packages``, whose ``.pth`` files run at start-up, ``PYTHONPATH``, the working
    directory under ``-m``), the directories a project installed in editable mode puts
    there, the interpreter and its library, and ``trees``.
    """
    from pysandboxes._policy.view import (
        interpreter_libraries,
        interpreter_roots,
        launcher_search_path,
    )

    roots = interpreter_roots(launcher_search_path())
    places = [*roots, *interpreter_libraries(), sys.executable]
    places += [os.path.abspath(entry or ".") for entry in sys.path]
    places = list(dict.fromkeys(os.path.realpath(place) for place in [*places, *trees]))
    # Packages python-sb imports from an editable install: writing in any subdirectory
    # changes a module it imports. Other editable packages may hold writable data.
    imported = {name.partition(".")[0] for name in sys.modules} | {"pysandboxes", "python_sb"}
    packages = [
        os.path.realpath(root)
        for root in roots
        if os.path.basename(root) in imported
        and os.path.isdir(root)
        and not any(within(root, tree) for tree in trees)
    ]
    return places, packages


def _library_trees() -> list[str]:
    """The trees whose every module python-sb's interpreter may import: the standard
    library and the site directories. Writing anywhere inside one changes its code."""
    import site

    trees = [os.path.dirname(os.__file__), *site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        trees.append(site.getusersitepackages())
    return [os.path.realpath(tree) for tree in trees]


def _launcher_issues(policy: Policy, partial: bool = False) -> list[ConfigIssue]:
    """Each writable rule holding a place python-sb loads code from, or lying inside a
    library tree or a package directory of python-sb's own imports (in partial mode:
    the application's, which imports from the same places and runs unsandboxed)."""
    writable = [rule for rule in policy.expose if rule.writable]
    if not writable:
        return []  # the common case: nothing to list
    trees = _library_trees()
    places, packages = launcher_code_places(trees)
    trees += packages
    issues: list[ConfigIssue] = []
    for rule in writable:
        path = os.path.realpath(rule.path)
        reached = next((place for place in places if within(place, path)), None)
        reached = reached or next((tree for tree in trees if within(path, tree)), None)
        if reached is not None:
            issues.append(
                ConfigIssue(
                    rule.origin.source,
                    rule.origin.line,
                    f"'{rule.origin.text}' lets the sandbox write in '{reached}', where "
                    + (
                        "the application loads its code from (it runs unsandboxed, with "
                        "every right): a sandboxed function could change the application's "
                        "modules, a .pth file or the rule file the next run obeys. Expose "
                        "only the directories the functions write (expose-rw=./data)"
                        if partial
                        else "python-sb's own interpreter loads code from: a module or "
                        ".pth file put there would run outside the sandbox on the next run. "
                        "Expose only the directories the program writes (expose-rw=./data), "
                        "or install python-sb outside them"
                    ),
                )
            )
    return issues


def refuse_planted_code(
    policy: Policy,
    child_env: Mapping[str, str],
    tempdir: str,
    cwd: str,
    *,
    sandboxed: bool = True,
    partial: bool = False,
    rule_files: Iterable[str] = (),
) -> None:
    """Refuse rules that let the sandbox plant code for the next run (see the module
    docstring); ``sandboxed``: whether this run is one (a learning run or ``none`` has no
    walls to keep, but its loader variables still load before Python). ``rule_files``:
    the files that would rule the next run, when no Python layer keeps them read-only
    (``py-sandbox=false``). ``partial``: the sandbox is partial mode's child, whose
    writes would reach the application's code. Raises ``ConfigRefusedError`` with every
    such rule."""
    issues = _launcher_issues(policy, partial) if sandboxed else []
    if sandboxed:
        issues += _rule_file_issues(policy, rule_files)
    for name in LOADER_VARIABLES:
        value = child_env.get(name, "")
        for part in _loader_places(name, value, cwd):
            below = part.endswith("/$")
            part = os.path.normpath(part[:-2]) if below else part
            if _writable(part, policy, tempdir, below=below):
                rule = next((r.origin for r in policy.env if r.name in (name, "*")), None)
                issues.append(
                    ConfigIssue(
                        rule.source if rule else "<env>",
                        rule.line if rule else 0,
                        f"{name} names {'a directory in ' if below else ''}'{part}', "
                        "where the sandbox may write: the loader "
                        "would run what a sandbox put there before any wall; forward a "
                        "path the sandbox cannot write",
                    )
                )
                break
    if issues:
        raise ConfigRefusedError(issues)


def _rule_file_issues(policy: Policy, rule_files: Iterable[str]) -> list[ConfigIssue]:
    """Each writable rule over a rule file: only the Python layer keeps one read-only
    inside a writable exposure (Landlock cannot take a file back from a writable tree),
    and a rule file the sandbox rewrote would rule the next run."""
    issues: list[ConfigIssue] = []
    for path in dict.fromkeys(rule_files):  # the rule file is also a searched place
        real = os.path.realpath(path)
        rule = next((r for r in policy.expose if r.writable and within(real, r.path)), None)
        if rule is None:
            continue
        issues.append(
            ConfigIssue(
                rule.origin.source,
                rule.origin.line,
                f"'{rule.origin.text}' lets the sandbox write '{path}', which rules the next "
                "run, and py-sandbox=false turns off the Python layer, the only one that "
                "keeps it read-only: keep py-sandbox=true, or expose only the directories "
                "the program writes (expose-rw=./data)",
            )
        )
    return issues


def startup_flags(
    python_flags: Iterable[str], policy: Policy, child_env: Mapping[str, str], tempdir: str
) -> tuple[str, ...]:
    """``-s`` when the user's site directory lies where the sandbox may write: its ``.pth``
    files run code at start-up, before any wall."""
    flags = set(python_flags)
    if {"-s", "-I", "-S"} & flags or "PYTHONNOUSERSITE" in child_env:
        return ()
    home = child_env.get("HOME") or os.path.expanduser("~")
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    user_site = os.path.join(home, ".local", "lib", version, "site-packages")
    return ("-s",) if _writable(user_site, policy, tempdir) else ()


def refuse_replaceable_rule_links(policy: Policy) -> None:
    """Refuse to start when a link on the way to a rule file lies where the sandbox may
    write: it could point the link elsewhere, and so choose the next run's rules. The
    kernel keeps files and directories on the way (a read-only bind, a mount point), but
    no link.

    Raises:
        ConfigRefusedError: naming each such link and the rule that makes it writable.
    """
    if not any(rule.writable and rule.is_dir for rule in policy.expose):
        return  # no link can lie in a read-write exposure (the common case: no import)
    from pysandboxes._policy.confinement import replaceable_links
    from pysandboxes._policy.lines import display_name

    issues = [
        ConfigIssue(
            place.origin.source,
            place.origin.line,
            f"the rules are read through the link '{display_name(link, os.getcwd())}', "
            f"which '{place.origin.text}' "
            "lets the sandbox replace (and so choose the next run's rules): point the "
            "rule file at its target, or keep the link out of read-write exposures",
        )
        for link, place in replaceable_links(policy)
    ]
    if issues:
        raise ConfigRefusedError(issues)
