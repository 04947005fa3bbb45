"""The rules of the next run, as the trusted side found them at start, checked at exit.

A sandbox may try to change what its next run obeys in two ways the kernel cannot always
refuse:

- **plant** a rule file where the rule search looks before the one in use (the script's
  directory is searched before the working directory, a ``pyproject.toml`` gains a
  ``[tool.py-sandboxes]`` table): Landlock cannot refuse one new name in a directory it
  lets the sandbox write, and no mount can stand where no file exists yet;
- **rewrite** a rule file inside a read-write exposure where no read-only bind could be
  made (``subprocess``, learning runs, a host without unprivileged mount namespaces).

So at start the launcher notes each of those places (``snapshot``): the rule files the
sandbox could write, with their bytes and mode, and the places of the search that hold
no rule file. At exit, once nothing the program started runs any more (the waiter
checked it), the waiter compares (``check``): a file that appeared is moved aside, a
rule file that changed gets its bytes back (the changed version moved aside too), and
each is reported. The next run then reads the reviewed rules, whatever the program did.

Nothing is decided on what the program says: the waiter reads the files itself.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from pysandboxes._policy.discover import Discovery
    from pysandboxes._policy.model import Policy

#: Kinds of entry: a rule file to keep as it was, a place to keep free of rule files, a
#: ``pyproject.toml`` to keep without a ``[tool.py-sandboxes]`` table, a link on the way
#: to a rule file to keep pointing where it pointed.
RULES, ABSENT, NO_TABLE, LINK = "rules", "absent", "no-table", "link"
#: A read-write exposure to sweep at exit for rule files made there (``rulesweep``): the
#: names to look for, NUL-separated, and the coarse clock at start.
SWEEP, KNOWN = "sweep", "known"
#: Linux's CLOCK_REALTIME_COARSE, which the time module does not name.
_REALTIME_COARSE = 5
Entry = tuple[str, str, bytes, int]


def snapshot(
    rule_files: Iterable[str],
    writable: Iterable[str],
    places: Iterable[str],
    links: Iterable[str] = (),
    sweeps: Iterable[str] = (),
    names: Iterable[str] = (".py-sandboxes",),
) -> bytes:
    """What ``check`` compares with, as bytes for the waiter.

    Args:
        rule_files: the rule files in use (includes too, missing ones as well).
        writable: those of them the sandbox might write (the others only get watched for
            appearing, when missing).
        places: where the rule search looks before the rule file in use (or, without
            one, every place it looks), ``pyproject.toml`` included.
        links: the links on the way to the rule files (``links.links_on_the_way``).
        sweeps: the read-write exposures to sweep at exit for rule files named ``names``
            (or a ``pyproject.toml`` with a table) made or changed during the run.
    """
    import marshal
    import time

    mutable = {os.path.realpath(path) for path in writable}
    entries: list[Entry] = []
    # The clock the kernel stamps inodes with: a change after this moment is the run's.
    since = time.clock_gettime_ns(_REALTIME_COARSE)
    listed = b"\0".join(os.fsencode(name) for name in dict.fromkeys(names))
    entries += [(SWEEP, os.path.realpath(root), listed, since) for root in dict.fromkeys(sweeps)]
    # The run's own rule files, kept by the entries below or not the sandbox's to change:
    # the sweep leaves them be.
    entries += [(KNOWN, os.path.realpath(path), b"", 0) for path in rule_files]
    for link in dict.fromkeys(links):
        try:
            entries.append((LINK, link, os.fsencode(os.readlink(link)), 0))
        except OSError:
            continue  # gone already: the rule file's own entry reports the change
    seen: set[str] = set()
    for path in [*rule_files, *places]:
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        entry = _entry(real, real in mutable)
        if entry is not None:
            entries.append(entry)
    return marshal.dumps(tuple(entries))


def _entry(path: str, mutable: bool) -> Entry | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return (ABSENT, path, b"", 0)
    except OSError:
        return None  # a place the trusted side cannot read: nor does the rule search
    if os.path.basename(path) == "pyproject.toml" and not mutable:
        content = _read(path)  # a place of the search: it has no table yet
        mode = stat.S_IMODE(info.st_mode)
        return None if content is None else (NO_TABLE, path, content, mode)
    if not mutable or not stat.S_ISREG(info.st_mode):
        return None
    content = _read(path)
    return None if content is None else (RULES, path, content, stat.S_IMODE(info.st_mode))


def check(data: bytes) -> list[str]:
    """Compare with ``snapshot``'s ``data``, set back what changed; one message for each
    (empty when nothing did)."""
    import marshal

    messages: list[str] = []
    entries = marshal.loads(data)
    for kind, path, content, mode in entries:
        if kind == ABSENT and os.path.lexists(path):
            aside = _move_aside(path)
            done = {"?": "it could not be moved: remove it", "": "it was removed"}
            messages.append(
                f"{_shown(path)} appeared while the program ran, where the rule search "
                f"looks: {done.get(aside, f'moved to {_shown(aside)}')}; the next run "
                "would have obeyed it"
            )
        elif kind == LINK and _retargeted(path, content):
            aside = _move_aside(path) if os.path.lexists(path) else ""
            try:
                os.symlink(content, path)
                restored = True
            except OSError:
                restored = False
            messages.append(
                f"{_shown(path)}, a link on the way to a rule file, was changed while the "
                "program ran: "
                + ("it points where it did again" if restored else "it could not be restored")
                + (f"; the changed one is in {_shown(aside)}" if aside.strip("?") else "")
            )
        elif kind in (RULES, NO_TABLE) and _changed(kind, path, content, mode):
            aside = _move_aside(path) if os.path.lexists(path) else ""
            restored = _restore(path, content, mode)
            messages.append(
                f"{_shown(path)} was changed while the program ran: "
                + ("its reviewed version is back" if restored else "it could not be restored")
                + (f"; the changed version is in {_shown(aside)}" if aside.strip("?") else "")
            )
    known = {path for kind, path, _, _ in entries if kind != SWEEP}
    for kind, path, content, since in entries:
        if kind == SWEEP:  # after the run's own files are back (their ctime is new)
            from pysandboxes._host.rulesweep import sweep

            names = {os.fsdecode(name) for name in content.split(b"\0")}
            messages += sweep(path, names, since, known, _move_aside, _has_table, _read)
    return messages


def _shown(path: str) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        relative = os.path.relpath(path)
    except (OSError, ValueError):
        return path
    return path if relative.startswith("..") else relative


def _retargeted(path: str, target: bytes) -> bool:
    try:
        return os.fsencode(os.readlink(path)) != target
    except OSError:
        return True  # removed, or no longer a link


def _changed(kind: str, path: str, content: bytes, mode: int) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return kind == RULES  # removed, or put where it cannot be read
    now = _read(path) if stat.S_ISREG(info.st_mode) else None
    if kind == NO_TABLE:
        # Any other change is the program's business; a table of rules is not.
        return now != content and _has_table(now)
    return now != content or stat.S_IMODE(info.st_mode) != mode


def _has_table(text: bytes | None) -> bool:
    """Whether a ``pyproject.toml`` holds a ``[tool.py-sandboxes]`` table, however spelt;
    text that is not TOML counts as one (the search would stop on it). The standard
    library's parser: the waiter runs without site-packages."""
    import tomllib

    if text is None:
        return False
    try:
        tool = tomllib.loads(text.decode("utf-8")).get("tool")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return True
    return isinstance(tool, dict) and "py-sandboxes" in tool


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _move_aside(path: str) -> str:
    """Rename ``path`` to ``<path>.planted`` (or a random free name after it, which the
    program cannot have taken beforehand); remove it when it cannot be moved. Returns
    the new name, ``""`` when removed, ``"?"`` when it is still there."""
    names = [f"{path}.planted"] + [f"{path}.planted-{os.urandom(4).hex()}" for _ in range(3)]
    for aside in names:
        if os.path.lexists(aside):
            continue
        try:
            os.rename(path, aside)
        except OSError:
            break
        return aside
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            import shutil

            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError:
        return "?"
    return ""


def _restore(path: str, content: bytes, mode: int) -> bool:
    """Write ``content`` back at ``path``: a new file renamed into place, or, in a
    directory the trusted side may not write, the file itself rewritten."""
    temporary = f"{path}.restoring-{os.getpid()}"
    try:
        _write(temporary, os.O_CREAT | os.O_EXCL, content, mode)
        os.rename(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        try:
            _write(path, os.O_TRUNC | os.O_NOFOLLOW, content, mode)
        except OSError:
            return False
    return True


def _write(path: str, flags: int, content: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | flags, 0o600)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def for_run(
    policy: Policy, found: Discovery, provider: str, output: str | None, given: str | None
) -> bytes:
    """The snapshot of a run (see ``snapshot``).

    ``output``: the file a learning run writes; ``given``: ``--pysandboxes-config``.
    Under ``subprocess`` (learning runs too) every rule file is writable, to native code.
    Under the others, those inside a read-write exposure: a read-only bind keeps the
    file, but the directory holding it may be renamed away and made again, a new rule
    file in it (and no mount namespace may be had on this host).
    """
    from pysandboxes._policy.pathnames import within

    files = [*policy.rule_files]
    files += [policy.learn.value] if policy.learn is not None else []
    files += [output] if output else []
    if provider == "subprocess":
        writable = files
    else:
        places = [os.path.realpath(r.path) for r in policy.expose if r.writable]
        writable = [f for f in files if any(within(os.path.realpath(f), p) for p in places)]
    from pysandboxes._policy.links import links_on_the_way
    from pysandboxes._policy.parser import DEFAULT_RULE_FILE

    links = [link for path in files for link in links_on_the_way(path)]
    sweeps = [r.path for r in policy.expose if r.writable and r.is_dir]
    names = [DEFAULT_RULE_FILE] + ([given] if given and "/" not in given else [])
    return snapshot(files, writable, search_places(found, given), links, sweeps, names)


def search_places(found: Discovery, given: str | None) -> list[str]:
    """Where the rule search of the next run looks before it reaches the rule file in use
    (everywhere it looks, without one), under the name it is given and the default
    name; and ``pyproject.toml`` when the search would reach it."""
    from pysandboxes._policy.parser import DEFAULT_RULE_FILE

    searched = list(found.searched)
    if found.path is not None:
        searched = searched[: searched.index(found.path)]
    places: list[str] = []
    for place in searched:
        places.append(place)
        if os.path.basename(place) not in (DEFAULT_RULE_FILE, "pyproject.toml"):
            places.append(os.path.join(os.path.dirname(place), DEFAULT_RULE_FILE))
    reaches = given is None and (found.path is None or found.path.endswith("pyproject.toml"))
    if reaches and searched:
        places.append(os.path.join(os.path.dirname(searched[-1]), "pyproject.toml"))
    return places


class Followed:
    """A run's snapshot that follows the trusted side's own writes to its rule files: the
    rule a prompt's ``ALWAYS`` writes (``_host.prompts``) is the reviewed version ``check``
    keeps, not a change it sets back.

    ``data`` is what ``check`` compares with at exit. Only a file as the snapshot has it
    is written to (``unchanged``): a rule file the program rewrote meanwhile is not built
    upon, and ``check`` sets it back."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def unchanged(self, path: str) -> bool:
        """Whether ``path`` holds what the snapshot says (true when it is not watched)."""
        import marshal

        real = os.path.realpath(path)
        for kind, watched, content, mode in marshal.loads(self.data) if self.data else ():
            if watched == real and kind in (RULES, NO_TABLE):
                return not _changed(kind, watched, content, mode)
        return True

    def wrote(self, path: str) -> None:
        """The trusted side wrote ``path``: its bytes now are the reviewed version."""
        import marshal

        if not self.data:
            return
        real = os.path.realpath(path)
        entries: list[Entry] = []
        for kind, watched, content, mode in marshal.loads(self.data):
            if watched == real and kind in (RULES, NO_TABLE):
                now = _read(real)
                if now is not None:
                    kind, content = RULES, now
                    mode = stat.S_IMODE(os.lstat(real).st_mode)
            entries.append((kind, watched, content, mode))
        self.data = marshal.dumps(tuple(entries))
