"""The trusted side of the socket broker: it judges every address the sandbox's native
code connects or sends to, and makes the call itself (see ``_kernel.unixbroker``).

For each call the filter hands over, the broker takes a copy of the sandbox's socket
(``pidfd_getfd``: what the descriptor is cannot change under it), copies the address
and the data out of the sandbox's memory once (bounded: ``MAX_ADDRESS``, ``MAX_DATA``,
``MAX_VECTORS``), judges the address with the rules, then calls ``connect``, ``sendto``
or ``sendmsg`` on its copy with what it copied. An AF_UNIX address is opened first
(``O_PATH``, the last link followed by hand) and judged by the real path of the socket
file it names; the call then names that file as ``/proc/self/fd/N``, so that no rename
or link made meanwhile changes which socket is reached. An IPv4 or IPv6 address is
judged by the ``net=`` rules, as the Python layer judges it. Anything unexpected refuses
the call (fail closed); nothing the sandbox sends runs here or outlives its call.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import stat
import struct
import threading

from pysandboxes._kernel.unixbroker import CALLS, Calls
from pysandboxes._policy.model import Access

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._policy.judge import FileJudge, NetJudge

#: The most bytes of an address, of the data of one call, of I/O vectors and of
#: ancillary data copied from the sandbox: beyond them the call is refused.
MAX_ADDRESS = 128
MAX_DATA = 1 << 20
MAX_VECTORS = 1024
MAX_CONTROL = 4096
#: The most calls answered at once: what the sandbox can make this side hold.
MAX_CALLS = 32
#: The most of the sandbox's descriptors held at once for the messages passing them
#: (SCM_RIGHTS; the kernel's most for one message): each is a descriptor of this process,
#: the application's own in partial mode, and a call may wait as long as the sandbox likes.
MAX_PASSED = 253
_RECV, _SEND = 0xC0502100, 0xC0182101  # SECCOMP_IOCTL_NOTIF_RECV, _SEND
_ID_VALID = 0x40082102  # SECCOMP_IOCTL_NOTIF_ID_VALID
#: struct seccomp_notif (id, pid, flags, then seccomp_data: nr, arch, ip, args[6]) and
#: struct seccomp_notif_resp (id, val, error, flags).
_NOTIFICATION, _RESPONSE = struct.Struct("=QIIiIQ6Q"), struct.Struct("=QqiI")
_MSGHDR = struct.Struct("=QI4xQQQQi4x")  # name, namelen, iov, iovlen, control, len, flags
_IOVEC, _CMSG = struct.Struct("=QQ"), struct.Struct("=Qii")
_SCM_RIGHTS = 1
_LINKS = 40


class SocketBroker:
    """Answers the brokered calls of one sandbox (its processes share one listener)."""

    def __init__(self, channel: int, child: int, files: FileJudge, net: NetJudge) -> None:
        self._channel = channel
        self._child = child
        self._files = files
        self._net = net
        calls = CALLS[os.uname().machine]
        self._calls = calls
        self._libc = _libc()
        self._running = threading.BoundedSemaphore(MAX_CALLS)
        self._passing = 0
        self._passing_lock = threading.Lock()
        self._handlers = {
            calls.connect: self._connect,
            calls.sendto: self._sendto,
            calls.sendmsg: self._sendmsg,
            calls.sendmmsg: self._sendmmsg,
        }

    def start(self) -> threading.Thread:
        """Take the listener and answer its calls in a daemon thread, until the sandbox
        ends."""
        thread = threading.Thread(target=self._serve, name="pysandboxes-broker", daemon=True)
        thread.start()
        return thread

    # -- the listener ------------------------------------------------------------------

    def _serve(self) -> None:
        listener = self._take()
        if listener is None:
            return
        buffer = ctypes.create_string_buffer(_NOTIFICATION.size)
        ioctl = self._libc.ioctl
        ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
        try:
            while True:
                ctypes.memset(buffer, 0, _NOTIFICATION.size)
                if ioctl(listener, _RECV, buffer) < 0:
                    # ENOENT also when the caller was interrupted before it was read (a
                    # signal the sandbox sends itself): only a hang-up ends the broker.
                    if ctypes.get_errno() in (errno.EINTR, errno.ENOENT) and not _hung_up(listener):
                        continue
                    return  # no process of the sandbox is left
                notification = _NOTIFICATION.unpack(buffer.raw)
                # A call may wait (a full datagram queue, a slow server): each its thread,
                # at most MAX_CALLS at once (the sandbox's next calls wait for one).
                self._running.acquire()
                threading.Thread(
                    target=self._answer, args=(listener, notification), daemon=True
                ).start()
        finally:
            os.close(listener)

    def _take(self) -> int | None:
        """The listener, copied from the sandboxed process that announced its number."""
        try:
            line = b""
            while not line.endswith(b"\n") and len(line) < 16:
                part = os.read(self._channel, 16)
                if not part:
                    return None  # the sandbox needs no broker, or ended first
                line += part
            number = int(line)
            for pid in _descendants(self._child):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{number}") != "anon_inode:seccomp notify":
                        continue
                    with _Pidfd(self._libc, self._calls, pid) as pidfd:
                        listener = pidfd.take(number)
                except OSError:
                    continue
                os.write(self._channel, b"k")
                return listener
            return None
        except (OSError, ValueError):
            return None
        finally:
            os.close(self._channel)

    def _answer(self, listener: int, notification: tuple[int, ...]) -> None:
        identifier, pid, _, number, _, _, *arguments = notification
        value, error = 0, 0
        try:
            handler = self._handlers.get(number)
            if handler is None:
                raise OSError(errno.EPERM, "not a brokered call")
            with _Memory(pid) as memory, _Pidfd(self._libc, self._calls, memory.process) as pidfd:
                # The caller may have died and its number gone to another process (the
                # call can wait here long): what was opened by number is the caller's
                # only if its call still waits once all is open.
                self._still_waiting(listener, identifier)
                memory.pidfd = pidfd
                sock = pidfd.take(arguments[0])
                try:
                    value = handler(memory, sock, arguments)
                finally:
                    os.close(sock)
        except OSError as exc:
            error = -(exc.errno or errno.EPERM)
        except Exception:  # fail closed: nothing unexpected goes through
            error = -errno.EPERM
        finally:
            self._running.release()
        response = ctypes.create_string_buffer(_RESPONSE.pack(identifier, value, error, 0))
        self._libc.ioctl(listener, _SEND, response)  # a call interrupted meanwhile: ENOENT

    def _still_waiting(self, listener: int, identifier: int) -> None:
        pending = ctypes.c_uint64(identifier)
        if self._libc.ioctl(listener, _ID_VALID, ctypes.byref(pending)) < 0:
            raise OSError(errno.ESRCH, "the caller is gone")

    # -- the calls ---------------------------------------------------------------------

    def _connect(self, memory: _Memory, sock: int, arguments: list[int]) -> int:
        address = memory.read(arguments[1], arguments[2], MAX_ADDRESS)
        with self._judged(memory, sock, address, "OUT", connecting=True) as named:
            return self._checked(self._libc.connect(sock, _buffer(named), len(named)))

    def _sendto(self, memory: _Memory, sock: int, arguments: list[int]) -> int:
        data = memory.read(arguments[1], min(arguments[2], MAX_DATA), MAX_DATA)
        address = memory.read(arguments[4], arguments[5], MAX_ADDRESS)
        with self._judged(memory, sock, address, "OUT") as named:
            sent = self._libc.sendto(
                sock, data, len(data), arguments[3], _buffer(named), len(named)
            )
            return self._checked(sent)

    def _sendmsg(self, memory: _Memory, sock: int, arguments: list[int]) -> int:
        return self._send_message(memory, sock, arguments[1], arguments[2])

    def _sendmmsg(self, memory: _Memory, sock: int, arguments: list[int]) -> int:
        # The first message only (a partial send, as the call allows): its length is
        # written back where the sandbox reads it.
        if arguments[2] == 0:
            return 0
        sent = self._send_message(memory, sock, arguments[1], arguments[3])
        memory.write(arguments[1] + _MSGHDR.size, struct.pack("=I", sent))
        return 1

    def _send_message(self, memory: _Memory, sock: int, header: int, flags: int) -> int:
        name, name_length, vectors, count, control, control_length, _ = _MSGHDR.unpack(
            memory.read(header, _MSGHDR.size, _MSGHDR.size)
        )
        if count > MAX_VECTORS:
            raise OSError(errno.EMSGSIZE, "too many I/O vectors")
        chunks: list[bytes] = []
        total = 0
        for index in range(count):
            base, length = _IOVEC.unpack(memory.read(vectors + index * 16, 16, 16))
            length = min(length, MAX_DATA - total)
            chunks.append(memory.read(base, length, MAX_DATA))
            total += length
        data = b"".join(chunks)
        address = memory.read(name, name_length, MAX_ADDRESS) if name and name_length else b""
        taken: list[int] = []
        try:
            ancillary = self._ancillary(memory, control, control_length, taken)
            with self._judged(memory, sock, address, "OUT") as named:
                return self._sendmsg_call(sock, named, data, ancillary, flags)
        finally:
            for fd in taken:
                os.close(fd)
            self._release(len(taken))

    def _ancillary(self, memory: _Memory, control: int, length: int, taken: list[int]) -> bytes:
        """The ancillary data, its descriptors (SCM_RIGHTS) the broker's copies of the
        sandbox's; any other kind is refused (credentials would be the broker's)."""
        if not control or not length:
            return b""
        raw = memory.read(control, length, MAX_CONTROL)
        out = bytearray()
        offset = 0
        while offset + _CMSG.size <= len(raw):
            size, level, kind = _CMSG.unpack_from(raw, offset)
            if size < _CMSG.size or offset + size > len(raw):
                raise OSError(errno.EINVAL, "malformed ancillary data")
            if level != socket.SOL_SOCKET or kind != _SCM_RIGHTS:
                raise OSError(errno.EPERM, "only descriptors may be passed")
            payload = raw[offset + _CMSG.size : offset + size]
            numbers = struct.unpack(f"={len(payload) // 4}i", payload[: len(payload) // 4 * 4])
            self._reserve(len(numbers))
            mine: list[int] = []
            try:
                for number in numbers:
                    mine.append(memory.take(number))
            finally:
                self._release(len(numbers) - len(mine))
                taken.extend(mine)
            body = struct.pack(f"={len(mine)}i", *mine)
            out += _CMSG.pack(_CMSG.size + len(body), level, kind) + body
            out += bytes(-len(out) % 8)
            offset += (size + 7) // 8 * 8
        return bytes(out)

    def _reserve(self, count: int) -> None:
        with self._passing_lock:
            if self._passing + count > MAX_PASSED:
                raise OSError(errno.ETOOMANYREFS, "too many descriptors passed at once")
            self._passing += count

    def _release(self, count: int) -> None:
        with self._passing_lock:
            self._passing -= count

    # -- judging -----------------------------------------------------------------------

    def _judged(
        self,
        memory: _Memory,
        sock: int,
        address: bytes,
        direction: str,
        *,
        connecting: bool = False,
    ) -> _Named:
        """The address the call is made with, judged (see the module)."""
        if not address:
            return _Named(b"", None)  # the connected peer, judged when connected
        family = int.from_bytes(address[:2], "little")
        domain = _socket_option(sock, socket.SO_DOMAIN)
        if family == socket.AF_UNSPEC and domain != socket.AF_UNIX:
            if connecting:
                return _Named(address, None)  # dissolves a datagram socket's association
            family = domain  # IPv4 sends to an AF_UNSPEC address as to an AF_INET one
        if family != domain:
            raise OSError(errno.EAFNOSUPPORT, "the address is not of the socket's family")
        if family == socket.AF_UNIX:
            return self._unix(memory, address)
        if family in (socket.AF_INET, socket.AF_INET6):
            self._inet(sock, family, address, direction)
            return _Named(address, None)
        raise OSError(errno.EPERM, "no rule speaks of this family")

    def _inet(self, sock: int, family: int, address: bytes, direction: str) -> None:
        port = int.from_bytes(address[2:4], "big")
        if family == socket.AF_INET:
            host = socket.inet_ntop(family, address[4:8])
        else:
            host = socket.inet_ntop(family, address[8:24])
        kind = _socket_option(sock, socket.SO_TYPE)
        proto = "tcp" if kind == socket.SOCK_STREAM else "udp"
        if not self._net.judge(proto, host, port, direction).allowed:
            raise OSError(errno.EACCES, "no net= rule allows it")

    def _unix(self, memory: _Memory, address: bytes) -> _Named:
        path = address[2:].split(b"\0", 1)[0]
        if not path:
            # An abstract name (or none): no rule speaks of them, and Landlock's scope
            # keeps them to the sandbox's own, which the broker cannot reach for it.
            raise OSError(errno.EPERM, "abstract socket names are not brokered")
        named = memory.open("cwd", os.O_PATH | os.O_DIRECTORY)
        try:
            socket_file = _open_socket(os.fsdecode(path), named)
        finally:
            os.close(named)
        try:
            real = os.readlink(f"/proc/self/fd/{socket_file}")
            if not stat.S_ISSOCK(os.fstat(socket_file).st_mode):
                raise OSError(errno.ECONNREFUSED, "not a socket")
            if not self._files.judge(real, Access.WRITE).allowed:
                raise OSError(errno.EACCES, "no rule exposes the socket for writing")
        except BaseException:
            os.close(socket_file)
            raise
        pinned = b"/proc/self/fd/%d\0" % socket_file
        return _Named(struct.pack("=H", socket.AF_UNIX) + pinned, socket_file)

    # -- the calls, made --------------------------------------------------------------

    def _checked(self, result: int) -> int:
        if result < 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number))
        return int(result)

    def _sendmsg_call(
        self, sock: int, address: bytes, data: bytes, ancillary: bytes, flags: int
    ) -> int:
        parts = [ctypes.create_string_buffer(p, len(p) or 1) for p in (address, data)]
        control = ctypes.create_string_buffer(ancillary, len(ancillary) or 1)
        vector = ctypes.create_string_buffer(_IOVEC.pack(ctypes.addressof(parts[1]), len(data)))
        header = _MSGHDR.pack(
            ctypes.addressof(parts[0]) if address else 0,
            len(address),
            ctypes.addressof(vector),
            1,
            ctypes.addressof(control) if ancillary else 0,
            len(ancillary),
            0,
        )
        message = ctypes.create_string_buffer(header, len(header))
        return self._checked(self._libc.sendmsg(sock, message, flags))


class _Named:
    """An address for the call, and the socket file it pins, closed after the call."""

    def __init__(self, address: bytes, pinned: int | None) -> None:
        self.address = address
        self._pinned = pinned

    def __enter__(self) -> bytes:
        return self.address

    def __exit__(self, *_: object) -> None:
        if self._pinned is not None:
            os.close(self._pinned)
            self._pinned = None


class _Memory:
    """The memory of one sandboxed thread, read and written through its ``/proc``
    directory (which names no other thread once it ends); and its process (``process``),
    whose descriptors the call names (``take``, once ``pidfd`` is set)."""

    def __init__(self, pid: int) -> None:
        self._proc = os.open(f"/proc/{pid}", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self.pidfd: _Pidfd | None = None
        try:
            self.process = _thread_group(self)
        except BaseException:
            os.close(self._proc)
            raise

    def __enter__(self) -> _Memory:
        return self

    def __exit__(self, *_: object) -> None:
        os.close(self._proc)

    def open(self, name: str, flags: int) -> int:
        """A file of the thread's ``/proc`` directory."""
        return os.open(name, flags | os.O_CLOEXEC, dir_fd=self._proc)

    def take(self, number: int) -> int:
        """A copy of the process's descriptor ``number``."""
        if self.pidfd is None:
            raise OSError(errno.EBADF, "no pidfd yet")
        return self.pidfd.take(number)

    def read(self, where: int, length: int, most: int) -> bytes:
        if length > most:
            raise OSError(errno.EMSGSIZE, "more than the broker copies")
        if length == 0:
            return b""
        fd = self.open("mem", os.O_RDONLY)
        try:
            data = os.pread(fd, length, where)
        finally:
            os.close(fd)
        if len(data) != length:
            raise OSError(errno.EFAULT, "bad address")
        return data

    def write(self, where: int, data: bytes) -> None:
        fd = self.open("mem", os.O_WRONLY)
        try:
            os.pwrite(fd, data, where)
        finally:
            os.close(fd)


class _Pidfd:
    """A pidfd of one sandboxed process, to copy its descriptors."""

    def __init__(self, libc: ctypes.CDLL, calls: Calls, pid: int) -> None:
        self._libc = libc
        self._calls = calls
        self._pid = pid
        self._fd = -1

    def __enter__(self) -> _Pidfd:
        self._fd = self._syscall(self._calls.pidfd_open, self._pid, 0)
        return self

    def take(self, number: int) -> int:
        """A copy of the process's descriptor ``number`` (close-on-exec)."""
        return self._syscall(self._calls.pidfd_getfd, self._fd, number, 0)

    def _syscall(self, *arguments: int) -> int:
        result = int(self._libc.syscall(*(ctypes.c_long(a) for a in arguments)))
        if result < 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number))
        return result

    def __exit__(self, *_: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)


def _libc() -> ctypes.CDLL:
    """The C library, its functions typed for the broker's calls."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    size, pointer = ctypes.c_size_t, ctypes.c_void_p
    libc.connect.argtypes = [ctypes.c_int, pointer, ctypes.c_uint]
    libc.sendto.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        size,
        ctypes.c_int,
        pointer,
        ctypes.c_uint,
    ]
    libc.sendmsg.argtypes = [ctypes.c_int, pointer, ctypes.c_int]
    libc.connect.restype = ctypes.c_int  # an int: read wider, -1 was 4294967295, no error
    for function in (libc.sendto, libc.sendmsg):
        function.restype = ctypes.c_ssize_t
    return libc


def _buffer(address: bytes) -> ctypes.Array[ctypes.c_char] | None:
    return ctypes.create_string_buffer(address, len(address)) if address else None


def _open_socket(path: str, cwd: int) -> int:
    """An ``O_PATH`` descriptor of the file ``path`` names (relative to ``cwd``), links
    followed by hand so that the last one is judged where it leads."""
    for _ in range(_LINKS):
        parent, name = os.path.split(path)
        base = os.open(parent or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=cwd)
        try:
            found = os.open(name or ".", os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=base)
            if not stat.S_ISLNK(os.fstat(found).st_mode):
                return found
            os.close(found)
            target = os.readlink(name, dir_fd=base)
            real_parent = os.readlink(f"/proc/self/fd/{base}")
        finally:
            os.close(base)
        path = os.path.join(real_parent, target)
    raise OSError(errno.ELOOP, "too many links")


def _socket_option(sock: int, option: int) -> int:
    with socket.socket(fileno=os.dup(sock)) as probe:
        return probe.getsockopt(socket.SOL_SOCKET, option)


def _thread_group(memory: _Memory) -> int:
    with open(memory.open("status", os.O_RDONLY), "rb") as status:
        for line in status:
            if line.startswith(b"Tgid:"):
                return int(line.split()[1])
    raise OSError(errno.ESRCH, "no such process")


def _hung_up(listener: int) -> bool:
    """Whether no process is left to make the filter's calls."""
    import select

    poll = select.poll()
    poll.register(listener, select.POLLIN)
    return any(events & (select.POLLHUP | select.POLLERR) for _, events in poll.poll(0))


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, parents first."""
    found: list[int] = []
    queue = [pid]
    while queue and len(found) < 64:
        current = queue.pop(0)
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children", "rb") as children:
                    queue += [int(child) for child in children.read().split()]
        except OSError:
            continue
    return found
