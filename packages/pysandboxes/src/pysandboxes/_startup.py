"""Places whose code runs before the walls, or outside them: the sandbox may not write them.

A file the sandbox writes where code is loaded from at start-up runs, on the next run,
where no rule holds: a library named by ``LD_PRELOAD`` before Python starts, a ``.pth``
file of the user's site before the guards, a module or ``.pth`` file where python-sb's own
interpreter imports from in the trusted launcher and waiter. Rules that would let the
sandbox write there are refused before anything starts (or, for the user's site, that
site is not read).
"""

from __future__ import annotations

import os
import sys

from pysandboxes.errors import ConfigIssue, ConfigSyntaxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from pysandboxes._policy.model import Policy

#: Variables with which the C library loads or reads code named by a path, before Python.
LOADER_VARIABLES = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "LOCPATH")


def _writable(path: str, policy: Policy, tempdir: str) -> bool:
    real = os.path.realpath(path)
    places = [tempdir, *(rule.path for rule in policy.expose if rule.writable)]
    return any(real == p or real.startswith(p.rstrip("/") + "/") for p in places)


def _overlap(one: str, other: str) -> bool:
    """Whether one path is the other, or lies inside it, or holds it."""
    one, other = one.rstrip("/") or "/", other.rstrip("/") or "/"
    return (
        one == other
        or one.startswith(other.rstrip("/") + "/")
        or other.startswith(one.rstrip("/") + "/")
    )


def launcher_code_places() -> list[str]:
    """Where this interpreter loads code from: its import path (the script's directory,
    the standard library, ``site-packages``, whose ``.pth`` files run at start-up) and
    the user's site, even before it exists (a writable parent could make it)."""
    import site

    places = [entry for entry in sys.path if entry and os.path.isabs(entry)]
    if site.ENABLE_USER_SITE:
        places.append(site.getusersitepackages())
    return list(dict.fromkeys(os.path.realpath(place) for place in places))


def _launcher_issues(policy: Policy, places: Iterable[str]) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    for rule in policy.expose:
        if not rule.writable:
            continue
        reached = next((place for place in places if _overlap(rule.path, place)), None)
        if reached is not None:
            issues.append(
                ConfigIssue(
                    rule.origin.source,
                    rule.origin.line,
                    f"'{rule.origin.text}' lets the sandbox write in '{reached}', where "
                    "python-sb's own interpreter loads code from: a module or .pth file "
                    "put there would run outside the sandbox on the next run. Expose only "
                    "the directories the program writes (expose-rw=./data), or install "
                    "python-sb outside them",
                )
            )
    return issues


def refuse_planted_code(policy: Policy, child_env: Mapping[str, str], tempdir: str) -> None:
    """Refuse rules that let the sandbox plant code for the next run (see the module
    docstring). Raises ``ConfigSyntaxError`` with every such rule."""
    issues = _launcher_issues(policy, launcher_code_places())
    for name in LOADER_VARIABLES:
        value = child_env.get(name, "")
        for part in value.replace(" ", ":").split(":"):
            if part and os.path.isabs(part) and _writable(part, policy, tempdir):
                rule = next((r.origin for r in policy.env if r.name in (name, "*")), None)
                issues.append(
                    ConfigIssue(
                        rule.source if rule else "<env>",
                        rule.line if rule else 0,
                        f"{name} names '{part}', where the sandbox may write: the loader "
                        "would run what a sandbox put there before any wall; forward a "
                        "path the sandbox cannot write",
                    )
                )
                break
    if issues:
        raise ConfigSyntaxError(issues)


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
