"""The places learning never grants whole, nor for writing: the system's trees, homes.

Learned paths are real paths, so these are resolved too (``/bin`` is ``/usr/bin`` on a
merged-/usr system; a home may be a link). Rules themselves are ``_learn.rules``' work.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .rules import Context

#: Directories of the system never granted whole (their files may be, one by one).
_SYSTEM_DIRECTORIES = (
    "/", "/bin", "/boot", "/dev", "/etc", "/etc/ssh", "/home", "/lib", "/media", "/mnt",
    "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
)  # fmt: skip
#: Directories of a home that hold keys, tokens or commands run by the user.
_SECRET_HOME_DIRECTORIES = (
    ".ssh", ".aws", ".gnupg", ".config", ".kube", ".docker", ".local", ".local/bin",
    ".azure", ".gcloud", ".netrc", ".password-store",
)  # fmt: skip
#: Trees where learning grants single files for reading only (see ``_system_tree``).
_SYSTEM_TREES = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/opt", "/proc", "/run", "/sbin",
    "/srv", "/sys", "/usr", "/var",
)  # fmt: skip


def sensitive_directories(context: Context) -> frozenset[str]:
    """Directories never granted whole: their files are granted one by one instead.

    Every entry is resolved, as learned paths are (``/bin`` is ``/usr/bin`` on merged-/usr
    systems; a home may be a link).
    """
    found: set[str] = set(_SYSTEM_DIRECTORIES)
    homes = {"/root", context.home.rstrip("/") or "/"} if context.home else {"/root"}
    for home in homes:
        found |= {home, *(f"{home}/{d}" for d in _SECRET_HOME_DIRECTORIES)}
    parent: str = os.path.realpath(context.cwd) if context.cwd else ""
    while parent not in ("/", ""):
        parent = os.path.dirname(parent)
        found.add(parent)
    return frozenset(found | {os.path.realpath(p) for p in found})


def system_tree(path: str, context: Context) -> bool:
    """Whether ``path`` lies in the system's trees or a home's hidden entries, where no
    directory is granted and nothing is granted for writing: a learned line there would
    hand every later run the machine (cron jobs, shell start-up files, keys). The project
    itself (the rule file's directory) is never one, wherever it lives."""
    project = os.path.realpath(context.rule_dir)
    if path == project or path.startswith(project.rstrip("/") + "/"):
        return False
    for root in _SYSTEM_TREES:
        for real in {root, os.path.realpath(root)}:
            if path == real or path.startswith(real + "/"):
                return True
    return home_hidden(path, context)


def home_hidden(path: str, context: Context) -> bool:
    """Whether ``path`` is a hidden entry of a home (``~/.bashrc``, ``~/.ssh/...``)."""
    for home in {"/root", context.home.rstrip("/")} - {""}:
        for real in {home, os.path.realpath(home)}:
            if path.startswith(real + "/."):
                return True
    return False
