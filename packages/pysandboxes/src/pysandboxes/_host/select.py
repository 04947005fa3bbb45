"""Which kernel provider a run gets: what the rules ask for, checked against this host.

``os-sandbox=`` names one provider, or a list in order of preference
(``os-sandbox=bwrap, landlock``): the list is the user's explicit consent to the later,
weaker ones. Without the key, ``OS_SANDBOX`` from the environment is read the same way,
and without either the default is Landlock. A provider that cannot run here is never
replaced silently: the run stops with what is missing and how to fix it, unless the list
names a fallback. Only ``subprocess`` (the Python layer alone) and ``none`` always run.

Nothing in the environment weakens the rules: ``OS_SANDBOX``, read directly or through a
``${OS_SANDBOX...}`` reference in the rule, may choose among the kernel providers, never
``subprocess`` or ``none`` (an MCP client's ``env`` block or any parent process could set
it); those are written in the rule file or given on the command line.
"""

from __future__ import annotations

import os
import sys

from pysandboxes._record import record
from pysandboxes.errors import OSLayerUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from pysandboxes._policy.model import Policy

#: Providers, strongest wall first, with what each adds to the Python layer.
DESCRIPTIONS = {
    "landlock": "Landlock: the kernel refuses files, programs, TCP ports and signals the "
    "rules do not grant",
    "bwrap": "bubblewrap: a mount namespace showing only what the rules expose",
    "unshare": "unshare: namespaces (mounts, processes, network) around the sandbox",
    "subprocess": "the Python layer only: no kernel layer",
    "none": "no sandbox: the program runs with no guard and no kernel layer",
}
DEFAULT = "landlock"

_FIXES = {
    "landlock": "use a kernel with Landlock enabled (Linux 5.13 or later, 'landlock' in the "
    "lsm= boot parameter)",
    "bwrap": "install bubblewrap (Debian and Ubuntu: apt install bubblewrap)",
    "unshare": "install util-linux and allow user namespaces "
    "(sysctl kernel.unprivileged_userns_clone=1)",
}


@record
class Selection:
    """The provider a run gets.

    Attributes:
        provider: the provider that will run.
        requested: the providers asked for, in order (the first is the preferred one).
        source: where the choice came from: a rule (``file(line)``), ``OS_SANDBOX`` or
            ``default``.
        passed_over: providers of the list that cannot run here, with why.
    """

    provider: str
    requested: tuple[str, ...]
    source: str
    passed_over: tuple[tuple[str, str], ...] = ()

    @property
    def weaker_than_asked(self) -> bool:
        """Whether a fallback the user consented to is in use."""
        return bool(self.passed_over)


def unavailable_reason(provider: str) -> str | None:
    """Why ``provider`` cannot run on this host, or ``None`` when it can."""
    if provider == "landlock":
        from pysandboxes._kernel import landlock

        return landlock.unavailable_reason()
    if provider == "bwrap":
        from pysandboxes._kernel import bwrap

        return bwrap.unavailable_reason() or user_namespaces_reason()
    if provider == "unshare":
        from pysandboxes._kernel import unshare

        return unshare.unavailable_reason() or user_namespaces_reason()
    return None


def user_namespaces_reason() -> str | None:
    """Why this process cannot make namespaces (with a user namespace when not root),
    or ``None`` when it can."""
    if os.geteuid() == 0:
        return None
    for knob, why in _USER_NAMESPACE_KNOBS:
        try:
            with open(knob) as handle:
                if handle.read().strip() == "0":
                    return why
        except OSError:
            continue  # the first knob exists on Debian-patched kernels only
    return None


_USER_NAMESPACE_KNOBS = (
    (
        "/proc/sys/kernel/unprivileged_userns_clone",
        "unprivileged user namespaces are disabled on this host",
    ),
    ("/proc/sys/user/max_user_namespaces", "user namespaces are disabled on this host"),
)


def parse_choice(value: str) -> tuple[str, ...]:
    """``"bwrap, landlock"`` as ``("bwrap", "landlock")`` (validated by the parser)."""
    return tuple(part.strip().lower() for part in value.split(",") if part.strip())


def select(policy: Policy, environ: Mapping[str, str]) -> Selection:
    """The provider of a run on this host.

    Raises:
        OSLayerUnavailable: no provider of the choice can run here; the message says what
            is missing, how to fix it, and how to accept a weaker provider.
    """
    setting = policy.os_sandbox
    if setting is not None:
        requested, source = parse_choice(setting.value), setting.origin.where
        if "${" in setting.origin.text:  # the value came from the environment
            _refuse_weakening(requested, f"'{setting.origin.text}' ({source})")
    elif environ.get("OS_SANDBOX", "").strip():
        requested, source = parse_choice(environ["OS_SANDBOX"]), "OS_SANDBOX"
        _refuse_weakening(requested, "the OS_SANDBOX variable")
        unknown = [p for p in requested if p not in DESCRIPTIONS]
        if unknown:
            raise OSLayerUnavailable(
                f"OS_SANDBOX names an unknown provider '{unknown[0]}': use one of "
                f"{', '.join(DESCRIPTIONS)}.",
                provider=unknown[0],
            )
    else:
        requested, source = (DEFAULT,), "default"
    passed_over: list[tuple[str, str]] = []
    for provider in requested:
        reason = unavailable_reason(provider)
        if reason is None:
            return Selection(provider, requested, source, tuple(passed_over))
        passed_over.append((provider, reason))
    raise OSLayerUnavailable(_refusal(requested, source, passed_over), provider=requested[0])


#: Providers without a kernel layer (``subprocess``) or without any (``none``).
WEAK = ("subprocess", "none")


def _refuse_weakening(requested: tuple[str, ...], through: str) -> None:
    weak = [p for p in requested if p in WEAK]
    if weak:
        raise OSLayerUnavailable(
            f"os-sandbox={weak[0]} came from the environment, through {through}: the "
            "environment may choose among the kernel providers (landlock, bwrap, unshare), "
            f"never {' or '.join(WEAK)}. To run without a kernel layer, write "
            f"'os-sandbox={weak[0]}' in the rule file, or pass --os-sandbox={weak[0]}.",
            provider=weak[0],
        )


def _refusal(requested: tuple[str, ...], source: str, missing: list[tuple[str, str]]) -> str:
    first = requested[0]
    lines = [f"os-sandbox '{first}' cannot run on this host: {missing[0][1]}."]
    lines += [f"'{p}', named next, cannot run either: {why}." for p, why in missing[1:]]
    fix = _FIXES.get(first)
    if fix:
        lines.append(f"To fix it, {fix}.")
    where = "the rules" if source not in ("default", "OS_SANDBOX") else "the command line"
    lines.append(
        f"To accept a weaker layer instead, say so in {where}: e.g. "
        f"'os-sandbox={', '.join((*requested, 'subprocess'))}' runs the first that works "
        "('subprocess' is the Python layer alone)."
    )
    return " ".join(lines)


def say_what_is_missing(policy: Policy, provider: str, source: str, layers: bool) -> None:
    """One line on stderr, terminal or not, when a run lacks a layer: no kernel layer,
    no Python layer, or none at all (the rules are then enforced by nothing)."""
    setting = policy.py_sandbox
    off = f"py-sandbox=false ({setting.origin.where})" if setting is not None else ""
    if not layers:
        why = f"{off} and os-sandbox={provider}" if off else f"os-sandbox={provider} ({source})"
        line = f"NOT SANDBOXED: {why} leave no layer to enforce the rules"
        line += "; only the environment is filtered."
    elif not policy.python_layer:
        line = f"{off}: no Python layer; the kernel layer (os-sandbox={provider}) alone"
        line += " enforces the rules"
    elif provider == "subprocess":
        line = f"os-sandbox=subprocess ({source}): no kernel layer; the Python layer alone"
        line += " enforces the rules"
    else:
        return
    print(f"python-sb: {line}", file=sys.stderr)
