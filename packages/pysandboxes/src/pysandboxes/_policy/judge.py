"""Verdict functions: a ``Policy`` compiled once into judges that answer in microseconds.

Every later layer asks these and nothing else: the guards before an access, the learning
enforcer to know what is missing, the kernel plan to know what to grant. A verdict names
the deciding rule and, when a rule would allow the access, the exact line to add.
"""

from __future__ import annotations

import os
import sys

from pysandboxes._policy.globs import Below, compile_ignore
from pysandboxes._policy.model import Access, Verdict
from pysandboxes._policy.netjudge import NetJudge as NetJudge
from pysandboxes._policy.pathnames import within
from pysandboxes._policy.registry import SENSITIVE_FUNCTIONS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from pysandboxes._policy.model import ExposeRule, IgnoreRule, Origin, Policy


#: The name of rule files; the sandbox may write none, anywhere.
RULE_FILE_NAME = ".py-sandboxes"
#: ``Verdict.fix`` of a refused rule file the rules do not know yet.
PLANTED_RULES = "<planted-rules>"


#: Most paths whose covering exposure ``FileJudge.exposure`` remembers.
_MEMO = 8192


class FileJudge:
    """Judges an absolute path and an access against ``expose-*``, ``ignore=``, protection.

    The path must already be absolute and resolved (the guards resolve symlinks); the
    judge itself does no I/O, so its answer depends on the rules alone.
    """

    def __init__(
        self,
        exposures: Iterable[ExposeRule],
        ignores: Iterable[IgnoreRule],
        protected: Iterable[str] = (),
        protected_by: Origin | None = None,
    ) -> None:
        self._exposures = {rule.path: rule for rule in exposures}
        ignores_list = list(ignores)
        self._ignore = compile_ignore(ignores_list)
        self._protected = frozenset(os.path.normpath(p) for p in protected)
        self._protected_parents = frozenset(
            parent for path in self._protected for parent in _ancestors(path)
        )
        self._protected_by = protected_by
        # The directories above an exposure exist, and the rules say so: a stat of them
        # reveals nothing new, and os.makedirs(exist_ok=True) needs it.
        self._leading = frozenset(parent for path in self._exposures for parent in _ancestors(path))
        self.has_ignores = bool(ignores_list)
        self._writable = tuple(rule.path for rule in self._exposures.values() if rule.writable)
        anchors = set(self._exposures) | {_static_prefix(r) for r in ignores_list if _anchored(r)}
        self._anchors = frozenset(anchors)
        self._anchor_parents = frozenset(parent for path in anchors for parent in _ancestors(path))
        self._stable: dict[str, bool] = {}
        self._covering: dict[str, ExposeRule | None] = {}
        self._below = [(r, Below(r.pattern, r.base)) for r in ignores_list if r.base is not None]

    def exposure(self, path: str) -> ExposeRule | None:
        """The most specific exposure covering the normalised absolute ``path``, if any."""
        exposures = self._exposures
        rule = exposures.get(path)
        if rule is not None:
            return rule
        covering = self._covering
        if path in covering:  # judged before: the rules never change
            return covering[path]
        current = path
        while current:
            current = current[: current.rfind("/")]
            rule = exposures.get(current or "/")
            if rule is not None and rule.is_dir:
                break
        else:
            rule = None
        if len(covering) >= _MEMO:
            covering.clear()
        covering[path] = rule
        return rule

    def stable(self, rule: ExposeRule) -> bool:
        """Whether the sandbox can change nothing on the way to what ``rule`` exposes.

        True for a read-only exposure with no read-write exposure above it: there the
        sandbox can rename nothing and plant no symlink, so what a path resolves to once
        stays true (the guards then cache it).
        """
        known = self._stable.get(rule.path)
        if known is None:
            known = not rule.writable and not any(
                within(rule.path, root) for root in self._writable
            )
            self._stable[rule.path] = known
        return known

    def writable_directory(self, path: str) -> bool:
        """Whether ``path`` is a directory the sandbox may change entries of."""
        rule = self.exposure(path)
        return rule is not None and rule.writable and rule.is_dir

    def shadows_protected(self, path: str) -> bool:
        """Whether creating ``path`` (by rename or link) could put a protected file there."""
        return path in self._protected or path in self._protected_parents

    def link_replaces(self, path: str) -> ExposeRule | None:
        """The file rule, or directory rule to make, that a link made at ``path`` would
        replace, if any: its next run would follow the link to its target."""
        rule = self._exposures.get(path)
        if rule is None or (rule.is_dir and not rule.writable):
            return None
        parent = self.exposure(path.rpartition("/")[0] or "/")
        return rule if parent is None or not parent.writable else None

    def carries_ignored(self, source: str, target: str) -> IgnoreRule | None:
        """The ``ignore=`` rule whose matches below ``source`` a rename to ``target``
        could take out of it, if any (real paths; see ``globs.Below.keeps``)."""
        return next((r for r, below in self._below if not below.keeps(source, target)), None)

    def exposed_entries(self, directory: str) -> frozenset[str]:
        """The names in ``directory`` that are exposures or lead to one."""
        prefix = directory.rstrip("/") + "/"
        return frozenset(
            path[len(prefix) :].partition("/")[0]
            for path in self._exposures
            if path.startswith(prefix)
        )

    def leads_to_exposure(self, path: str) -> bool:
        """Whether ``path`` is a directory above an exposure (its existence is no secret)."""
        return path in self._leading

    def judge(self, path: str, access: Access) -> Verdict:
        """The verdict for ``access`` to the absolute, resolved ``path``."""
        if "/." in path or "//" in path or (path.endswith("/") and path != "/"):
            path = os.path.normpath(path)
        rule = self.exposure(path)
        ignored = self._ignore(path, rule.path if rule is not None else None)
        if ignored is not None:
            return Verdict(False, ignored.origin, hidden=True)
        if access.modifies and (
            path in self._protected or (access is Access.DELETE and path in self._protected_parents)
        ):
            return Verdict(False, self._protected_by, hidden=False)
        if access.modifies and path.rpartition("/")[2] == RULE_FILE_NAME:
            # A rule file planted in a writable directory would rule the next run there.
            return Verdict(False, None, hidden=False, fix=PLANTED_RULES)
        if rule is None:
            key = "expose-rw" if access.modifies else "expose-ro"
            if access.modifies and path.startswith(SHARED_MEMORY + "/"):
                path = SHARED_MEMORY  # its names are made up per run: the place is the rule
            return Verdict(False, None, hidden=True, fix=f"{key}={path}")
        if access.modifies and not rule.writable:
            return Verdict(False, rule.origin, hidden=False, fix=f"expose-rw={path}")
        if access is Access.CREATE or access is Access.DELETE:
            if path == rule.path and path != "/":
                # The exposed path itself is an entry of its parent: replacing it (by a
                # symlink, say) would change what the rule names on the next run.
                parent = self.exposure(path.rpartition("/")[0] or "/")
                if (parent is None or not parent.writable) and not (
                    _creatable(rule) or _makeable(rule, access)
                ):
                    return Verdict(False, rule.origin, hidden=False, fix=EXPOSURE_ROOT)
            own_file = path == rule.path and _creatable(rule)  # nothing below a file
            if (
                access is Access.DELETE
                and not own_file
                and (path in self._anchors or path in self._anchor_parents)
            ):
                # Rules name paths: renaming a directory above a narrower rule (a
                # read-only part, an ignored one) would carry its files out of that rule.
                return Verdict(False, rule.origin, hidden=False, fix=HOLDS_RULES)
        return Verdict(True, rule.origin)


def _creatable(rule: ExposeRule) -> bool:
    """Whether the program may create, remove and rename the file ``rule`` names: an
    ``expose-rw=`` of a file (a log it rotates, a database and its journal). A symbolic
    link made there is refused by the file guard (see ``link_replaces``), so the
    name still means a file of the program's on the next run."""
    return rule.writable and not rule.is_dir


def _makeable(rule: ExposeRule, access: Access) -> bool:
    """Whether the program may make the directory ``rule`` names (``expose-rw=./out/``
    in a clean checkout). By ``mkdir`` only: a link or a rename there would let the next
    run's rule follow it (the file guard refuses both, see ``link_replaces``); and never
    remove it, after which one could be made."""
    return rule.made and rule.writable and access is Access.CREATE


#: Where POSIX semaphores and shared memory live, under names made up per run.
SHARED_MEMORY = "/dev/shm"
#: ``Verdict.fix`` of a refused change to an exposed path itself, from outside its parent.
EXPOSURE_ROOT = "<exposure-root>"
#: ``Verdict.fix`` of a refused removal or rename of a directory narrower rules name.
HOLDS_RULES = "<holds-rules>"
#: ``Verdict.fix`` of a name the guard cannot judge, followed by why (fail closed).
UNJUDGEABLE = "<unjudgeable>"


def _anchored(rule: IgnoreRule) -> bool:
    return rule.base is not None or rule.pattern.startswith("/")


def _static_prefix(rule: IgnoreRule) -> str:
    """The part of an anchored ``ignore=`` pattern before its first wildcard."""
    full = os.path.normpath(os.path.join(rule.base or "/", rule.pattern))
    cut = min((full.find(c) for c in "*?[" if c in full), default=len(full))
    return full if cut == len(full) else (full[:cut].rpartition("/")[0] or "/")


def _ancestors(path: str) -> Iterable[str]:
    parent = os.path.dirname(path)
    while parent != path:
        yield parent
        path, parent = parent, os.path.dirname(parent)


#: Modules every program may import without a rule: those of 0.7.0's keep-list, this
#: package's public modules, ``__future__`` (a compiler directive), and the modules CPython's C code
#: imports by itself on the program's behalf (``time.strptime`` loads ``_strptime``,
#: ``object.__reduce_ex__`` loads ``copyreg``, codecs load ``encodings``).
KEPT_MODULES = frozenset(
    {
        "__future__",
        "__main__",
        "_io",
        "_strptime",
        "asyncio",
        "builtins",
        "copyreg",
        "encodings",
        "io",  # printing a traceback, C reads each line through io.open
        "pysandboxes",
        "pysandboxes.errors",
        "sys",
        "tokenize",
        "warnings",
        # 3.13: printing an uncaught exception goes through the traceback module.
        *(("traceback",) if sys.version_info >= (3, 13) else ()),
    }
)
#: Kept packages whose submodules are kept too (0.7.0 judges ``asyncio.subprocess``). The
#: sandbox's own modules are not: ``pysandboxes`` and its ``errors`` are its public ones.
_KEPT_PACKAGES = frozenset({"encodings"})


class ImportJudge:
    """Judges a module by its top-level name against ``python-import=``."""

    def __init__(self, policy: Policy) -> None:
        self._any = next((r.origin for r in policy.imports if r.any_module), None)
        self._allowed: dict[str, Origin] = {}
        for rule in policy.imports:
            for module in rule.modules:
                self._allowed.setdefault(module, rule.origin)

    @property
    def allows_any(self) -> bool:
        """Whether ``python-import=*`` switches the import guard off."""
        return self._any is not None

    def allowed_names(self) -> tuple[frozenset[str], frozenset[str]]:
        """Names allowed whatever follows them (rules' top-level names, kept packages),
        and names allowed exactly (the kept modules, whose submodules need a rule)."""
        return frozenset(self._allowed) | _KEPT_PACKAGES, KEPT_MODULES

    def judge(self, module: str) -> Verdict:
        """The verdict for importing ``module`` (dotted names judged on the top level)."""
        top = module.partition(".")[0]
        origin = self._allowed.get(top) or self._any
        if origin is not None:
            return Verdict(True, origin)
        if module in KEPT_MODULES or top in _KEPT_PACKAGES:
            return Verdict(True, None)
        return Verdict(False, None, fix=f"python-import={top}")


class ApiJudge:
    """Judges a sensitive function against ``python-api=``.

    A function rule beats a category rule, which beats ``*``; at the same level DENY wins;
    with no rule every registered function is refused. Unregistered names are allowed:
    they are not sensitive.
    """

    def __init__(self, policy: Policy) -> None:
        self._levels: dict[str, tuple[bool, Origin]] = {}
        for rule in policy.api:
            for target in rule.targets:
                known = self._levels.get(target)
                if known is None or (known[0] and not rule.allow):
                    self._levels[target] = (rule.allow, rule.origin)

    def names(self, qualname: str) -> bool:
        """Whether a rule names ``qualname`` itself (not its category or ``*``)."""
        return qualname in self._levels

    def judge(self, qualname: str) -> Verdict:
        """The verdict for calling ``qualname`` (e.g. ``os.system``)."""
        category = SENSITIVE_FUNCTIONS.get(qualname)
        if category is None:
            return Verdict(True, None)
        for target in (qualname, category, "*"):
            decided = self._levels.get(target)
            if decided is not None:
                allow, origin = decided
                fix = None if allow else f"python-api=ALLOW:{qualname}"
                return Verdict(allow, origin, category=category, fix=fix)
        return Verdict(False, None, category=category, fix=f"python-api=ALLOW:{qualname}")
