"""The per-family value checks of the parser: files, environment, imports, calls, providers.

Each function validates one rule line of its family and adds the rule to the builder,
or an issue naming the offending text.
"""

from __future__ import annotations

import os

from pysandboxes._policy.expand import ExpansionError, check
from pysandboxes._policy.lines import expand_home
from pysandboxes._policy.links import link_chain
from pysandboxes._policy.model import (
    ApiRule,
    EnvRule,
    ExposeRule,
    IgnoreRule,
    ImportRule,
    ProviderOption,
    UnenvRule,
)
from pysandboxes._policy.registry import CATEGORIES, SENSITIVE_FUNCTIONS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from pysandboxes._policy.builder import Builder
    from pysandboxes._policy.lines import RawRule
    from pysandboxes._policy.model import Origin

#: Kernel providers we ship, as ``os-sandbox=`` takes them.
PROVIDERS = ("landlock", "unshare", "bwrap", "subprocess", "none")
#: Options of each provider, as ``<provider>.<option>=``; values are checked by the provider.
PROVIDER_OPTIONS: dict[str, tuple[str, ...]] = {
    "bwrap": ("share-net", "unshare-net", "hostname"),
    "unshare": ("proc",),
    "landlock": (),
    "subprocess": (),
    "none": (),
}
#: Providers of the established implementation we do not ship: their options are ignored.
FOREIGN_PROVIDERS = ("qemu", "firejail")


def env_rule(builder: Builder, rule: RawRule) -> None:
    origin, value = rule.origin, rule.value
    if rule.key == "unenv":
        expanded = builder.expanded(rule)
        if expanded is None:
            return
        value = expanded
        if not value or "=" in value:
            builder.issue(origin, f"'{origin.text}': expected unenv=NAME or unenv=PATTERN*")
        else:
            builder.add("unenv", UnenvRule(value, origin))
        return
    name, equal, template = value.partition("=")
    name = name.strip()
    if not equal:
        hint = f": did you mean env={name}=${{{name}}}?" if name.isidentifier() else ""
        builder.issue(origin, f"missing '=' in '{origin.text}': expected env=NAME=value{hint}")
        return
    if not name or "\0" in name:
        builder.issue(origin, f"'{origin.text}': the variable name is empty or invalid")
        return
    try:
        check(template)
    except ExpansionError as exc:
        builder.issue(origin, f"in '{origin.text}': {exc}")
        return
    builder.add("env", EnvRule(name, template, origin))


def expose_rule(builder: Builder, rule: RawRule) -> None:
    origin = rule.origin
    value = builder.expanded(rule)
    if value is None:
        return
    if not value:
        builder.issue(origin, f"'{origin.text}': the path is empty")
        return
    expanded = expand_home(value, builder.env)
    if expanded is None:
        builder.issue(origin, f"'{origin.text}': cannot expand '~': no home directory")
        return
    written = os.path.normpath(os.path.join(rule.base, expanded))
    # /proc/self names the sandboxed process, not the one reading the rules.
    path = written if _is_proc_self(written) else os.path.realpath(written)
    is_dir = os.path.isdir(path)
    made = False
    if not os.path.exists(path):
        missing = _missing_exposure(builder, rule, written)
        if missing is None:
            return
        path, is_dir = missing, expanded.endswith("/")  # "./out/": a directory to make
        made = is_dir
    builder.add("expose", ExposeRule(path, rule.key == "expose-rw", is_dir, origin, made))
    if path != written:
        builder.add("expose-links", (written, origin))
        # The links on the way are names of the file too (os.path.realpath reads each,
        # a mount view must show them): readable, never writable, as the file's own
        # rule is the one to change it.
        for link in link_chain(written):
            builder.add("expose", ExposeRule(link, False, False, origin))


def _missing_exposure(builder: Builder, rule: RawRule, written: str) -> str | None:
    """The path a rule naming a missing file grants, or ``None`` (with a warning or an
    issue). ``expose-rw=`` names a file the program may create (a log, a database and its
    journal, in a clean checkout too), or with a final ``/`` a directory it may make
    (``expose-rw=./out/``): granted when its parent exists. A missing ``expose-ro=``
    target has nothing to read: a warning, and no rule."""
    origin = rule.origin
    if rule.key != "expose-rw":
        message = f"'{origin.text}': '{written}' does not exist: the rule grants nothing"
        builder.warn(origin, message)
        return None
    parent = os.path.realpath(os.path.dirname(written))
    if os.path.islink(written) or not os.path.isdir(parent):
        # A dangling link would grant its target once made; a missing directory is a typo
        # more often than a place the program makes (which an expose-rw= of it says).
        message = f"'{origin.text}': '{written}' does not exist, nor can its directory hold it"
        builder.issue(origin, message)
        return None
    return os.path.join(parent, os.path.basename(written))


def links_in_writable_exposures(
    builder: Builder, links: Iterable[tuple[str, Origin]], exposures: Iterable[ExposeRule]
) -> None:
    """Refuse a rule whose path goes through a symbolic link inside a writable exposure.

    A sandbox may replace an entry of a directory it can write by a link: a narrower rule
    naming that entry would then follow the link on the next run and grant its target.
    """
    writable = [rule for rule in exposures if rule.writable and rule.is_dir]
    for written, origin in links:
        prefix = "/"
        for part in written.strip("/").split("/"):
            here = os.path.join(prefix, part)
            inside = next(
                (w for w in writable if prefix == w.path or prefix.startswith(w.path + "/")),
                None,
            )
            if inside is not None and os.path.islink(here):
                builder.issue(
                    origin,
                    f"'{origin.text}': '{here}' is a symbolic link inside the writable "
                    f"exposure {inside.origin}, which a sandbox could have made: name the "
                    "real path, or remove the link",
                )
                break
            prefix = os.path.realpath(here)


def _is_proc_self(path: str) -> bool:
    normal = os.path.normpath(path)
    return normal in ("/proc/self", "/proc/thread-self") or normal.startswith(
        ("/proc/self/", "/proc/thread-self/")
    )


def ignore_rule(builder: Builder, rule: RawRule) -> None:
    origin = rule.origin
    value = builder.expanded(rule)
    if value is None:
        return
    pattern = (expand_home(value, builder.env) or value).rstrip("/") if value != "/" else value
    if not pattern or pattern == "/":
        builder.issue(origin, f"'{origin.text}': the pattern is empty")
        return
    if "/" not in pattern:
        builder.add("ignore", IgnoreRule(pattern, None, origin))  # any path component
        return
    # Anchored: judged against real paths, so its directories are resolved as an
    # exposure's are (a project reached through a "current" link, a linked conf/).
    written = os.path.normpath(os.path.join(rule.base, pattern))
    parts = written.strip("/").split("/")
    fixed = next((i for i, part in enumerate(parts) if any(c in part for c in "*?[")), len(parts))
    fixed = min(fixed, len(parts) - 1)  # the last name is matched as written
    directory = "/" + "/".join(parts[:fixed])
    real = directory if _is_proc_self(directory) else os.path.realpath(directory)
    if real != directory:
        builder.add("expose-links", (directory, origin))
    builder.add("ignore", IgnoreRule("/".join(parts[fixed:]), real, origin))


def import_rule(builder: Builder, rule: RawRule) -> None:
    origin = rule.origin
    value = builder.expanded(rule)
    if value is None:
        return
    names = [n.strip() for n in value.split(",")]
    if "*" in names:
        builder.add("imports", ImportRule(frozenset(), True, origin))
        return
    modules: set[str] = set()
    for name in names:
        if not name:
            builder.issue(origin, f"'{origin.text}': empty module name")
        elif all(part.isidentifier() and part.isascii() for part in name.split(".")):
            if "." in name:
                # As in the established format: a rule names a top-level module, and a
                # dotted name grants nothing (granting its top level would widen it).
                top = name.split(".")[0]
                builder.warn(
                    origin,
                    f"python-import rule '{name}' never matches: a rule names a top-level "
                    f"module, such as '{top}'",
                )
            else:
                modules.add(name)
        else:
            builder.issue(origin, f"'{origin.text}': '{name}' is not a module name")
    builder.add("imports", ImportRule(frozenset(modules), False, origin))


def api_rule(builder: Builder, rule: RawRule) -> None:
    origin = rule.origin
    value = builder.expanded(rule)
    if value is None:
        return
    action, colon, rest = value.partition(":")
    if not colon or action not in ("ALLOW", "DENY"):
        builder.issue(origin, f"'{origin.text}': expected python-api=ALLOW:targets or DENY:targets")
        return
    targets: list[str] = []
    for target in (t.strip() for t in rest.split(",")):
        if target in ("ALLOW", "DENY") or target.startswith(("ALLOW:", "DENY:")):
            builder.issue(origin, f"'{origin.text}': one action per line: do not mix them")
        elif not target:
            builder.issue(origin, f"'{origin.text}': empty target")
        elif target == "*" or target in CATEGORIES or target in SENSITIVE_FUNCTIONS:
            targets.append(target)
        else:
            builder.issue(origin, f"'{origin.text}': {_unknown_target(target)}")
    builder.add("api", ApiRule(action == "ALLOW", tuple(targets), origin))


def _unknown_target(target: str) -> str:
    if "." not in target:
        return f"unknown category '{target}': expected one of {', '.join(CATEGORIES)}"
    close = close_matches(target, list(SENSITIVE_FUNCTIONS), n=1)
    hint = f": did you mean '{close[0]}'?" if close else ""
    return f"'{target}' is not a registered sensitive function{hint}"


def provider_option(builder: Builder, rule: RawRule) -> None:
    provider, _, option = rule.key.partition(".")
    origin = rule.origin
    if provider in FOREIGN_PROVIDERS:
        builder.warn(origin, f"'{rule.key}' is ignored: the {provider} provider is not shipped")
        return
    options = PROVIDER_OPTIONS.get(provider)
    if options is None:
        close = close_matches(provider, PROVIDERS, n=1)
        hint = f": did you mean '{close[0]}.{option}'?" if close else ""
        builder.issue(origin, f"unknown provider '{provider}' in '{origin.text}'{hint}")
        return
    if option not in options:
        close = close_matches(option, options, n=1)
        known = ", ".join(options) or "none"
        hint = f" Did you mean '{provider}.{close[0]}'?" if close else ""
        builder.issue(origin, f"unknown option '{rule.key}' (known: {known}).{hint}")
        return
    value = builder.expanded(rule)
    if value is not None:
        builder.add("provider", ProviderOption(provider, option, value, origin))


def close_matches(word: str, choices: Iterable[str], n: int = 1, cutoff: float = 0.6) -> list[str]:
    """Close matches for "did you mean"; difflib is imported only when a rule is wrong."""
    import difflib

    return difflib.get_close_matches(word, list(choices), n=n, cutoff=cutoff)
