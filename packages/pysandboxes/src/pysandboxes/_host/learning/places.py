"""The places learning never grants whole, nor for writing: the system's trees, homes.

Learned paths are real paths, so these are resolved too (``/bin`` is ``/usr/bin`` on a
merged-/usr system; a home may be a link). ``Context`` is what the
trusted side knows of the host; rules themselves are ``rules``' work.
"""

from __future__ import annotations

import functools
import os

from pysandboxes._policy.pathnames import within
from pysandboxes._policy.secrets import secret_name, secret_path
from pysandboxes._record import record


@record
class Context:
    """What the trusted side knows of the run, beyond the events.

    Attributes:
        rule_dir: the directory of the file the rules go to.
        cwd: the program's working directory.
        home: the home directory, ``""`` when unknown.
        variables: ``(name, value)`` of the variables paths may be written with.
        host_names: the names of the host's variables (never their values).
        rule_files: the rule files of the run, never granted.
        code_roots: the interpreter's trees (its prefixes, standard library,
            site-packages, the launcher's import path) and the directories of ``PATH``:
            code there runs outside the sandbox (a ``.pth`` file runs in the next
            ``python-sb`` itself, a command in ``~/bin`` in the user's shell), so
            nothing there is learned for writing.
    """

    rule_dir: str
    cwd: str
    home: str
    variables: tuple[tuple[str, str], ...]
    host_names: frozenset[str]
    rule_files: frozenset[str]
    code_roots: frozenset[str] = frozenset()


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
#: Directories whose every entry is somebody's home.
HOME_PARENTS = ("/home",)
#: Trees where learning grants single files for reading only (see ``_system_tree``).
_SYSTEM_TREES = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/opt", "/proc", "/run", "/sbin",
    "/srv", "/sys", "/usr", "/var",
)  # fmt: skip


def homes(context: Context) -> frozenset[str]:
    """Every home learning keeps out of: ``$HOME``, the user's own home (``$HOME`` may
    say otherwise), ``/root`` and each ``/home/NAME`` (a run as root reaches them all)."""
    return _homes(context.home)


@functools.lru_cache(maxsize=8)
def _homes(home: str) -> frozenset[str]:
    found = {"/root", home.rstrip("/")}
    try:
        import pwd

        found.add(pwd.getpwuid(os.getuid()).pw_dir.rstrip("/"))
    except (ImportError, KeyError):
        pass
    for base in {*HOME_PARENTS, *(os.path.realpath(p) for p in HOME_PARENTS)}:
        try:
            found |= {f"{base}/{name}" for name in os.listdir(base)}
        except OSError:
            pass
    found.discard("")  # an unknown home, or "/" as some system accounts have
    return frozenset(found | {os.path.realpath(home) for home in found})


def sensitive_directories(context: Context) -> frozenset[str]:
    """Directories never granted whole: their files are granted one by one instead.

    Every entry is resolved, as learned paths are (``/bin`` is ``/usr/bin`` on merged-/usr
    systems; a home may be a link).
    """
    found: set[str] = set(_SYSTEM_DIRECTORIES)
    for home in homes(context):
        found |= {home, *(f"{home}/{d}" for d in _SECRET_HOME_DIRECTORIES)}
    parent: str = os.path.realpath(context.cwd) if context.cwd else ""
    while parent not in ("/", ""):
        parent = os.path.dirname(parent)
        found.add(parent)
    return frozenset(found | {os.path.realpath(p) for p in found})


def system_tree(path: str, context: Context) -> bool:
    """Whether ``path`` lies in the system's trees, the interpreter's trees (see
    ``Context.code_roots``) or a home's hidden entries, where no directory is granted and
    nothing is granted for writing: a learned line there would hand every later run the
    machine (cron jobs, shell start-up files, keys, a ``.pth`` file). The project itself
    (the rule file's directory) is never one, wherever it lives, unless it is such a
    place itself: a script in ``~`` or ``/`` does not make ``~/.bashrc`` its own."""
    project = os.path.realpath(context.rule_dir)
    if code_place(path, project, context):
        return True
    inside = within(path, project)
    if inside and not _system_place(project, context):
        return False
    for root in _SYSTEM_TREES:
        for real in {root, os.path.realpath(root)}:
            if path == real or path.startswith(real + "/"):
                return True
    return home_hidden(path, context)


def code_place(path: str, project: str, context: Context) -> bool:
    """Whether ``path`` lies in one of the interpreter's trees (a venv in the project
    too), unless the project itself lives in that tree."""
    for root in context.code_roots:
        if within(project, root):
            continue
        if within(path, root):
            return True
    return False


def _system_place(directory: str, context: Context) -> bool:
    """Whether ``directory`` is a home, a home's secret directory (``~/.config``...), a
    directory of the system or one of its trees' roots: never a project of its own."""
    places = {*_SYSTEM_DIRECTORIES, *_SYSTEM_TREES}
    for home in homes(context):
        places |= {home, *(f"{home}/{d}" for d in _SECRET_HOME_DIRECTORIES)}
    return directory in places | {os.path.realpath(p) for p in places}


def home_hidden(path: str, context: Context) -> bool:
    """Whether ``path`` is a hidden entry of a home (``~/.bashrc``, ``~/.ssh/...``)."""
    return any(path.startswith(home + "/.") for home in homes(context))


def secret_file(path: str, context: Context) -> bool:
    """Whether ``path`` holds keys or credentials: learned commented out, never granted."""
    return secret_path(path, homes(context))


def secret_variable(name: str) -> bool:
    """Whether a variable is named like a secret (``*_TOKEN``, ``*_KEY``, ``*SECRET*``...)."""
    return secret_name(name)
