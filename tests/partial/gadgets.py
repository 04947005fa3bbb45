"""Pickle gadgets: streams that run a payload in whoever unpickles them with ``pickle``.

Each builder returns the bytes of one gadget whose payload leaves a trace: a marker file
(created by a shell command, a program, Python code, a library call) or a TCP connection
to a listener. The tests show each runs under plain ``pickle.loads`` (the positive
control), then that a sandboxed function sending it as its reply runs nothing in the
application. Built with ``pickle.dumps`` of objects whose ``__reduce__`` is the gadget,
as a hostile child would.
"""

from __future__ import annotations

import functools
import importlib
import operator
import os
import pathlib
import pickle
import socket
import subprocess
import types
import typing
import zipfile
from collections.abc import Callable


class Call:
    """Pickles as ``function(*args)``: unpickling calls it."""

    def __init__(self, function: object, *args: object) -> None:
        self.function = function
        self.args = args

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (self.function, self.args)

    def __call__(self, *args: object) -> object:  # pickle checks a reduced callable is one
        raise TypeError("a gadget runs when unpickled, not here")


def _touch_code(mark: str) -> str:
    return f"open({mark!r}, 'w').close()"


def os_system(mark: str, port: int) -> object:
    return Call(os.system, f"touch {mark}")


def subprocess_popen(mark: str, port: int) -> object:
    return Call(subprocess.Popen, ["touch", mark])


def builtins_exec(mark: str, port: int) -> object:
    return Call(exec, _touch_code(mark))


def builtins_eval(mark: str, port: int) -> object:
    return Call(eval, _touch_code(mark))


def functools_partial(mark: str, port: int) -> object:
    return Call(functools.partial(os.system, f"touch {mark}"))


def operator_attrgetter_chain(mark: str, port: int) -> object:
    system = Call(operator.attrgetter("system"), Call(importlib.import_module, "os"))
    return Call(system, f"touch {mark}")


def operator_methodcaller_chain(mark: str, port: int) -> object:
    caller = operator.methodcaller("system", f"touch {mark}")
    return Call(caller, Call(importlib.import_module, "os"))


def typing_get_type_hints(mark: str, port: int) -> object:
    # The annotation is a string: get_type_hints evaluates it (the reference's bypass).
    code = f"__import__('os').system('touch {mark}')"
    return Call(typing.get_type_hints, types.SimpleNamespace(__annotations__={"x": code}))


def zipfile_zipfile(mark: str, port: int) -> object:
    return Call(zipfile.ZipFile, mark, "w")


def pathlib_write_text(mark: str, port: int) -> object:
    return Call(pathlib.Path.write_text, pathlib.Path(mark), "written")


def socket_create_connection(mark: str, port: int) -> object:
    return Call(socket.create_connection, ("127.0.0.1", port))


def pickle_loads_nested(mark: str, port: int) -> object:
    return Call(pickle.loads, pickle.dumps(os_system(mark, port)))


def nested_in_containers(mark: str, port: int) -> object:
    return {"rows": [1, (2.5, {"deep": [None, os_system(mark, port)]})]}


def nested_forty_levels_deep(mark: str, port: int) -> object:
    value: object = os_system(mark, port)
    for _ in range(40):
        value = [value]
    return value


class _GadgetError(Exception):
    """An exception whose own ``__reduce__`` is the gadget."""

    def __init__(self, mark: str) -> None:
        super().__init__("boom")
        self.mark = mark

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (os.system, (f"touch {self.mark}",))


def exception_own_reduce(mark: str, port: int) -> object:
    return _GadgetError(mark)


def in_exception_args(mark: str, port: int) -> object:
    return ValueError("bad", os_system(mark, port))


#: name -> builder(mark, port): the gadgets a result (or a raised exception) may carry.
GADGETS: dict[str, Callable[[str, int], object]] = {
    "os_system": os_system,
    "subprocess_popen": subprocess_popen,
    "builtins_exec": builtins_exec,
    "builtins_eval": builtins_eval,
    "functools_partial": functools_partial,
    "operator_attrgetter_chain": operator_attrgetter_chain,
    "operator_methodcaller_chain": operator_methodcaller_chain,
    "typing_get_type_hints": typing_get_type_hints,
    "zipfile_zipfile": zipfile_zipfile,
    "pathlib_write_text": pathlib_write_text,
    "socket_create_connection": socket_create_connection,
    "pickle_loads_nested": pickle_loads_nested,
    "nested_in_containers": nested_in_containers,
    "nested_forty_levels_deep": nested_forty_levels_deep,
    "exception_own_reduce": exception_own_reduce,
    "in_exception_args": in_exception_args,
}


def gadget_bytes(name: str, mark: str, port: int) -> bytes:
    return pickle.dumps(GADGETS[name](mark, port), protocol=5)
