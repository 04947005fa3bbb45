"""The path arguments of file APIs, read as C reads them, without running program code.

A path may arrive as ``str``, ``bytes``, ``os.PathLike``, a ``pathlib`` object or a
``file:`` URI (sqlite3); subclasses may lie through their methods. These helpers turn each
into the plain string the system call will use, or say it cannot be known.
"""

from __future__ import annotations

import os
import sys

from pysandboxes._inside.guards.pathobjects import path_object_text
from pysandboxes._inside.guards.paths import Unjudgeable
from pysandboxes._inside.guards.values import plain_path_text, unix_address
from pysandboxes._policy.model import Access

_ENCODING, _ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()

#: A path the guard cannot know without running the program's code: always refused.
UNKNOWABLE = "\0unknowable path object"


def exact_path(value: object) -> str | None:
    """``value`` as a plain ``str`` path, without running any code the program supplied.

    A ``str`` or ``bytes`` subclass could override the very methods the guard would call;
    concatenating with an empty exact string copies its raw characters instead. A
    ``pathlib`` path with the standard methods is read the way ``os.fspath`` reads it (its
    text is computed once, then kept in a slot: ``pathobjects``). Any other object (some
    events carry the argument as given, e.g. ``io.FileIO``) gives ``UNKNOWABLE``: asking
    it again could get a different answer than the system call got. ``None`` means "no
    path" (an int is a descriptor).
    """
    kind = type(value)
    if value is None or kind is int:
        return None
    text = plain_path_text(value)
    if text is not None:
        return text
    # A path object: the text its conversion left in its slot, read through the class's
    # descriptor (see ``pathobjects``), so no code of the program runs.
    text = path_object_text(value)
    return UNKNOWABLE if text is None else text


_HEX = frozenset(b"0123456789abcdefABCDEF")


def _unquote(text: str, uri: str) -> str:
    """Percent-decoding as SQLite does it for URI paths and parameters
    (``sqlite3ParseUri``): ``%`` and exactly two hex digits (``int(x, 16)`` would also take
    ``+f`` or `` f``). Any other ``%``, which SQLite keeps as written, and ``%00``, after
    which it drops the rest of the part, raise ``Unjudgeable``: a name spelled so that two
    decoders could disagree is refused, not guessed."""
    if "%" not in text:
        return text
    out = bytearray()
    data = text.encode("utf-8", "surrogateescape")
    i = 0
    while i < len(data):
        if data[i] == 0x25:
            if i + 2 >= len(data) or not {data[i + 1], data[i + 2]} <= _HEX:
                raise Unjudgeable(uri, f"in '{uri}', a '%' not followed by two hex digits")
            octet = int(data[i + 1 : i + 3], 16)
            if octet == 0:
                raise Unjudgeable(uri, f"in '{uri}', a '%00', which cuts the name short")
            out.append(octet)
            i += 3
            continue
        out.append(data[i])
        i += 1
    return out.decode("utf-8", "surrogateescape")


def sqlite_uri(uri: str) -> tuple[str, Access] | None:
    """The file a ``file:`` URI opens, and how; ``None`` for an in-memory database.

    Follows sqlite's rules: ``file:path``, ``file:///path`` and ``file://localhost/path``,
    a ``#fragment`` ignored, percent-encoding decoded (a malformed escape raises
    ``Unjudgeable``), and ``mode=`` parameters: the database is opened read-only only if
    every ``mode`` says ``ro``.
    """
    rest = uri[5:].partition("#")[0]
    location, _, query = rest.partition("?")
    if location.startswith("//"):
        authority, _, path = location[2:].partition("/")
        location = "/" + path if authority in ("", "localhost") else location
    modes = [
        _unquote(value, uri)
        for key, _, value in (item.partition("=") for item in query.split("&"))
        if _unquote(key, uri) == "mode"
    ]
    if modes and all(mode == "memory" for mode in modes):
        return None
    location = _unquote(location, uri) or ":memory:"
    if location == ":memory:":
        return None
    access = Access.READ if modes and all(mode == "ro" for mode in modes) else Access.WRITE
    return location, access


def sqlite_file(args: tuple[object, ...]) -> tuple[str, Access] | None:
    """The database file a ``sqlite3.connect`` event opens, and how; ``None`` for none."""
    database = exact_path(args[0]) if args else None
    if database is None or database in ("", ":memory:"):
        return None
    if database.startswith("file:"):
        return sqlite_uri(database)  # None: an in-memory database
    return database, Access.WRITE


def shm_file(args: tuple[object, ...]) -> tuple[str, Access] | None:
    """The file of ``/dev/shm`` a ``pysandboxes.shm`` event names, and how it is used.

    ``(api, name, flags)``, exact values made by the judged copies. glibc names the file
    ``/dev/shm/<name without its leading slashes>`` (and refuses any other "/")."""
    if len(args) != 3:
        return None
    api, name, flags = args
    if type(name) is not str or type(flags) is not int:
        return None
    path: str = "/dev/shm/" + name.lstrip("/")
    if api == "_posixshmem.shm_unlink":
        return path, Access.DELETE
    if flags & os.O_CREAT:
        return path, Access.CREATE
    if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
        return path, Access.WRITE
    return path, Access.READ


def unix_socket_file(args: tuple[object, ...]) -> str | None:
    """The socket file a ``socket.bind``, ``connect``, ``sendto`` or ``sendmsg`` event
    names; ``None`` for an IP or abstract address (the network guard judges those);
    ``UNKNOWABLE`` for an address whose bytes cannot be read without the program's code.

    The kernel reads a path's ``sun_path`` up to its first NUL, so the name judged does
    too."""
    address = args[1] if len(args) > 1 else None
    if address is None or issubclass(type(address), tuple):
        return None
    raw = unix_address(address)
    if raw is None:
        return UNKNOWABLE
    if raw[:1] in (b"", b"\0"):
        return None  # abstract, or an automatic abstract name (bind to "")
    return raw.partition(b"\0")[0].decode(_ENCODING, _ERRORS)
