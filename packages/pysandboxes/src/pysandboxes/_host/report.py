"""Which layer enforces each rule on this host: the Python layer, Landlock, namespaces.

The report is plain data (``LayerReport``), built from the rules, the provider chosen for
this host and what its kernel offers; ``python-sb --show-layers`` draws it, and
``pysandboxes.enforcement_report`` returns it as a dictionary for JSON. What a kernel
layer cannot enforce is stated in the row, never left out.
"""

from __future__ import annotations

from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._host.select import Selection
    from pysandboxes._policy.model import NetRule, Origin, Policy

PYTHON = "Python"
NO = ""


@record
class LayerRow:
    """One rule (or one standing protection) and who enforces it.

    Attributes:
        place: ``file(line)``, ``<arg>(n)``, or ``-`` for a protection no line states.
        rule: the rule as written, or what the protection is.
        python: what the Python layer does with it (empty: nothing).
        kernel: what the kernel layer does with it (empty: nothing).
        note: what is *not* enforced by the kernel, said plainly; empty when nothing.
    """

    place: str
    rule: str
    python: str
    kernel: str
    note: str = ""


@record
class LayerReport:
    """The rules of a run and the layers behind each, on this host.

    Attributes:
        provider: the kernel provider a run would get here.
        source: where the choice came from (a rule, ``OS_SANDBOX``, ``default``).
        detail: what the provider is, and its version on this kernel.
        passed_over: providers asked for first that cannot run here, with why.
        rows: one per rule, then the standing protections.
    """

    provider: str
    source: str
    detail: str
    passed_over: tuple[tuple[str, str], ...]
    rows: tuple[LayerRow, ...]

    def as_dict(self) -> dict[str, object]:
        """The report as JSON-ready data."""
        return {
            "provider": self.provider,
            "source": self.source,
            "detail": self.detail,
            "passed_over": [{"provider": p, "reason": r} for p, r in self.passed_over],
            "rules": [
                {f: getattr(row, f) for f in ("place", "rule", "python", "kernel", "note")}
                for row in self.rows
            ],
        }


class _Host:
    """What the chosen provider's kernel layer covers, by concern."""

    def __init__(self, provider: str, abi: int, python_layer: bool = True) -> None:
        self.provider = provider
        namespaces = provider in ("bwrap", "unshare")
        # bwrap and unshare apply Landlock inside their namespaces too.
        landlock = (provider == "landlock" or namespaces) and abi > 0
        files = ["bwrap mount view"] if provider == "bwrap" else []
        files += ["Landlock"] if landlock else []
        self.files = " + ".join(files)
        self.ports = "Landlock (TCP ports)" if landlock and abi >= 4 else NO
        signals = ["PID namespace"] if namespaces else []
        signals += ["Landlock scope"] if landlock and abi >= 6 else []
        self.signals = " + ".join(signals)
        self.exec = "Landlock (no execute right)" if landlock else NO
        self.no_network = (
            "network namespace" if provider != "subprocess" and (namespaces or landlock) else NO
        )
        self.python = provider != "none" and python_layer
        from pysandboxes._kernel.seccomp import unavailable_reason

        kernel_layer = provider in ("landlock", "bwrap", "unshare")
        self.kernel_layer = kernel_layer
        self.seccomp = "seccomp filter" if kernel_layer and not unavailable_reason() else NO
        # What a user namespace allows: a pid namespace, and read-only binds of the rule
        # files in a mount namespace (bwrap's view has them by construction).
        from pysandboxes._host.select import user_namespaces_reason

        self.userns = provider in ("landlock", "subprocess", "unshare") and (
            user_namespaces_reason() is None
        )
        own_pids = provider == "bwrap" or self.userns
        self.lifetime = "PID namespace" if own_pids and provider != "none" else NO
        binds = provider == "bwrap" or (self.userns and provider != "subprocess")
        self.rule_files = " + ".join(
            (["read-only bind (mount namespace)"] if binds else [])
            + ([self.files] * bool(self.files))
        )


def build(policy: Policy, selection: Selection, abi: int) -> LayerReport:
    """The report for ``policy`` under ``selection`` on a kernel with Landlock ``abi``."""
    from pysandboxes._host.select import DESCRIPTIONS
    from pysandboxes._policy.confinement import may_start_programs, tcp_ports

    host = _Host(selection.provider, abi, policy.python_layer)
    python = PYTHON if host.python else NO
    # What only the Python layer enforces; py-sandbox=false turns it off.
    only = (
        "the Python layer's only" if policy.python_layer else "not enforced with py-sandbox=false"
    )
    rows: list[LayerRow] = []

    def add(origin: Origin, python_part: str, kernel: str, note: str = "") -> None:
        rows.append(LayerRow(origin.where, origin.text, python_part, kernel, note))

    for rule in policy.expose:
        kernel = host.files
        add(rule.origin, python, kernel, "" if kernel else f"files are {only}")
    masking = host.provider in ("landlock", "unshare", "bwrap") and bool(host.files)
    for rule in policy.ignore:
        if masking:
            add(
                rule.origin,
                python,
                "masked in the sandbox's mount namespace (what exists at start)",
                "a path made later that matches is the Python layer's until the next start",
            )
            continue
        add(
            rule.origin,
            python,
            NO,
            ("" if policy.python_layer else f"{only}: ")
            + "a kernel layer only adds rights: inside an exposed directory, native code can "
            "still read an ignored path",
        )
    for rule in (*policy.env, *policy.unenv):
        add(
            rule.origin,
            "environment filter",
            NO,
            "the sandbox is started without the other variables: nothing is left to refuse",
        )
    network_allowed = any(rule.allow for rule in policy.net)
    connect_ports = tcp_ports(policy.net, "OUT")
    for rule in policy.net:
        add(rule.origin, python, *_net_kernel(rule, host, connect_ports, only))
    if not network_allowed and host.no_network:
        rows.append(LayerRow("-", "no net= rule allows anything", python, host.no_network, ""))
    for rule in policy.imports:
        add(rule.origin, python, NO, f"imports are {only}")
    starts_programs = may_start_programs(policy)
    for rule in policy.api:
        kernel, note = NO, f"sensitive calls are {only}"
        if host.exec and not starts_programs:
            kernel, note = host.exec, "no program may be started: the kernel refuses execve"
        add(rule.origin, python, kernel, note)
    for rule in policy.eval:
        add(rule.origin, python, NO, f"the eval-* sub-language is {only}")
    if not policy.api and host.exec:
        rows.append(LayerRow("-", "no program may be started", python, host.exec, ""))
    rows.append(
        LayerRow(
            "-",
            "signals and abstract sockets stay inside the sandbox",
            python,
            host.signals,
            ""
            if host.signals
            else "the Python layer refuses os.kill of other processes only"
            if host.python
            else "nothing refuses signals to other processes",
        )
    )
    view = "bwrap mount view" if selection.provider == "bwrap" else NO
    rows.append(
        LayerRow(
            "-",
            "modes, extended attributes and times of files outside the rules cannot change",
            python,
            view,
            ""
            if view != NO
            else "Landlock does not mediate chmod, setxattr or utimes: only "
            "set-ID bits are refused (seccomp); native code can chmod any file the user owns"
            if host.seccomp
            else "no kernel layer: native code can chmod any file the user owns",
        )
    )
    rows.append(
        LayerRow(
            "-",
            "no typing into the terminal; no kernel keyring, System V IPC, netlink or vsock "
            "socket, io_uring, bpf, perf events or userfaultfd",
            "refuses the terminal's ioctls" if host.python else NO,
            host.seccomp,
            "" if host.seccomp else "native code reaches them",
        )
    )
    rows.append(_unix_sockets_row(policy, host))
    rows += _rule_file_rows(host, python, policy)
    if host.python and policy.python_layer:
        rows.append(_decision_log_row(policy))
    detail = DESCRIPTIONS[selection.provider]
    if selection.provider == "landlock":
        detail += f" (ABI {abi} on this kernel)"
    if not policy.python_layer:
        detail = (
            f"{detail}; py-sandbox=false: the Python layer is off, the kernel layer alone "
            "enforces the rules"
            if host.kernel_layer
            else "NOT SANDBOXED: py-sandbox=false and no kernel layer leave no layer; only "
            "the environment is filtered"
        )
    return LayerReport(
        selection.provider, selection.source, detail, selection.passed_over, tuple(rows)
    )


def _net_kernel(
    rule: NetRule, host: _Host, connect_ports: tuple[int, ...] | None, only: str
) -> tuple[str, str]:
    if not rule.allow:
        return NO, f"DENY rules are {only} (a kernel layer only adds rights)"
    if "tcp" not in rule.protos:
        return NO, f"UDP is {only} while some network is allowed"
    if host.ports and connect_ports is not None:
        return host.ports, f"hosts and addresses are {only}"
    return NO, f"any TCP port: hosts and ports are {only}"


def _unix_sockets_row(policy: Policy, host: _Host) -> LayerRow:
    from pysandboxes._kernel.seccomp import UNJUDGED_UNIX_SOCKETS
    from pysandboxes._kernel.unixbroker import unavailable_reason as broker_reason
    from pysandboxes._policy.confinement import may_use_unix_sockets

    python = "connecting needs write access to the socket file" if host.python else NO
    if not may_use_unix_sockets(policy) and host.seccomp:
        kernel, note = "seccomp filter: no AF_UNIX socket is made (stream socketpair only)", ""
    elif host.provider == "bwrap":
        kernel, note = "bwrap mount view: only exposed socket files exist", ""
    elif host.provider in ("landlock", "unshare") and host.seccomp and not broker_reason():
        kernel = "seccomp socket broker: the trusted side judges each address"
        note = "abstract socket names are refused to native code"
    else:
        kernel, note = NO, UNJUDGED_UNIX_SOCKETS if host.seccomp else "native code reaches them"
    return LayerRow(
        "-", "AF_UNIX sockets reach only the exposed socket files", python, kernel, note
    )


def _rule_file_rows(host: _Host, python: str, policy: Policy) -> list[LayerRow]:
    """The standing protections of the next run's rules, and of the run's end."""
    import os

    from pysandboxes._policy.lines import display_name
    from pysandboxes._policy.links import links_on_the_way

    if not host.python:
        return []  # 'none': no sandbox, nothing of this is promised
    watched = "at exit, the trusted side compares them with what it read at start and "
    if host.rule_files.startswith("read-only"):
        note = ""
    elif host.files:
        note = "inside a read-write exposure, no mount namespace here: " + watched + "restores them"
    else:
        note = watched + "restores them"
    from pysandboxes._policy.confinement import replaceable_links

    links = sorted({link for path in policy.rule_files for link in links_on_the_way(path)})
    replaceable = {link for link, _ in replaceable_links(policy)}
    if links:
        # A link cannot be bound read-only: where the sandbox may write one, no run starts.
        shown = ", ".join(display_name(link, os.getcwd()) for link in links)
        kept = (
            "one lies in a read-write exposure, so python-sb refuses to start under a "
            "kernel provider"
            if replaceable
            else "none lies in a read-write exposure"
        )
        note = (note + "; " if note else "") + (
            f"the links on the way ({shown}) are not bound: {kept}, and at exit the "
            "trusted side sets a changed one back"
        )
    lifetime = (
        ""
        if host.lifetime
        else "no PID namespace here: the trusted side stops and ends what is left, and a "
        "learning run writes nothing while any process of the program remains"
    )
    return [
        LayerRow("-", "the rule files cannot be changed", python, host.rule_files, note),
        LayerRow(
            "-",
            "no rule file can be planted where the rule search looks first",
            python,
            NO,
            "a kernel layer cannot refuse one new name in a writable directory: at exit, the "
            "trusted side moves a new rule file there aside and says so, and so it does for "
            "one made in any read-write exposure (another script's)",
        ),
        LayerRow(
            "-",
            "nothing the program started outlives the run",
            "",
            host.lifetime,
            lifetime,
        ),
    ]


def _decision_log_row(policy: Policy) -> LayerRow:
    """What the decision log covers: the Python layer's decisions, never the kernel's."""
    setting = policy.audit_log
    place = setting.origin.where if setting is not None else "-"
    rule = setting.origin.text if setting is not None else "refusals summed up at exit"
    python = "reports each decision; the trusted side writes the log" if setting else ""
    return LayerRow(
        place,
        rule,
        python or "reports each refusal; the trusted side sums them up on stderr",
        "",
        "covers the Python layer's decisions only: an access only the kernel layer refuses "
        "fails with EACCES (PermissionError) and is in no log",
    )
