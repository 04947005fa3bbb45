"""Native code through the ctypes a library imported: numpy, scipy, sympy and pandas load
without a ``native`` grant, and the ctypes they hand on reaches no C and no memory.

Libraries import ctypes to read the sizes of C types (``sympy/external/gmpy.py``:
``from ctypes import c_long, sizeof``) or to describe arrays (numpy). Without a
``native`` grant the program meets the sandbox's stand-in ctypes there: the C types,
their sizes and values, no memory. Each probe reaches ctypes the way a program would
after such a library loaded it (``numpy.ctypeslib.ctypes``, ``sys.modules['ctypes']``
after ``import sympy``), then loads a library, calls the interpreter's C API, casts an
address to a pointer, reads an address, copies or reads memory by address, indexes a
pointer past its object or aims a union's pointer at an object: under plain python each
works (the control), under python-sb each is refused with the line that would allow it.
"""

from __future__ import annotations

import _ctypes
import shutil

import pytest
from escapelab import Lab, got

ROUTES = {
    "numpy_ctypeslib": "import numpy.ctypeslib\nctypes = numpy.ctypeslib.ctypes\n",
    "sympy_loaded_it": "import sympy\nctypes = sys.modules['ctypes']\n",
}

PROBES = {
    "load_a_library": "libc = ctypes.CDLL(None)\nprint('GOT', libc.getpid() == os.getpid())\n",
    "pythonapi": "print('GOT', ctypes.pythonapi.Py_GetVersion)\n",
    "cast_to_an_address": (
        "text = b'IN-MEMORY'\n"
        "pointer = ctypes.cast(id(text), ctypes.POINTER(ctypes.c_char))\n"
        "print('GOT', pointer[0])\n"
    ),
    "from_address": (
        "text = b'IN-MEMORY'\nprint('GOT', ctypes.c_char.from_address(id(text)).value)\n"
    ),
    "memmove": (
        "text = b'IN-MEMORY'\n"
        "copy = ctypes.create_string_buffer(40)\n"
        "ctypes.memmove(copy, id(text), 40)\n"
        "print('GOT', copy.raw)\n"
    ),
    "string_at": "text = b'IN-MEMORY'\nprint('GOT', ctypes.string_at(id(text), 40))\n",
    "pointer_past_its_object": (
        "pointer = ctypes.pointer(ctypes.c_int(1))\nprint('GOT', pointer[4])\n"
    ),
    # No event at all in CPython: a union aims a pointer at an immutable object.
    "union_pointer_write": (
        "text = b'IMMUTABLE-TEXT'\n"
        "class Aim(ctypes.Union):\n"
        "    _fields_ = [('n', ctypes.c_void_p), ('p', ctypes.POINTER(ctypes.c_char))]\n"
        "aim = Aim()\n"
        "aim.n = id(text) + bytes.__basicsize__ - 1\n"
        "aim.p[0] = b'X'\n"
        "print('GOT', text)\n"
    ),
}


@pytest.mark.parametrize("probe", sorted(PROBES))
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_cant_reach_c_or_memory_through_a_librarys_ctypes(lab: Lab, route: str, probe: str) -> None:
    code = lab.probe(ROUTES[route] + PROBES[probe] + "print('DONE')\n")
    assert got(lab.control(code), "DONE"), lab.control(code)
    # pythonapi is refused as a missing name is (an ImportError, as where ctypes has none):
    # `from ctypes import pythonapi` in a try/except ImportError falls back.
    refusal = "RuleModuleNotFoundError" if probe == "pythonapi" else "RuleApiPermissionError"
    result = lab.refused(code, refusal)
    assert "GOT" not in result.stdout, result.stdout
    assert "(category: native)" in result.stdout, result.stdout
    assert "Add 'python-api=ALLOW:native' to .py-sandboxes to allow it." in result.stdout


def test_a_native_grant_gives_the_real_ctypes(lab: Lab) -> None:
    lab.rules("expose-ro=./data", "python-api=ALLOW:native")
    code = lab.probe(ROUTES["sympy_loaded_it"] + PROBES["union_pointer_write"])
    assert got(lab.run_sandboxed(code), "GOT b'XMMUTABLE-TEXT'")


def test_numpy_refuses_to_load_a_library_without_a_grant(lab: Lab) -> None:
    # numpy.ctypeslib.load_library looks for the file first: the lab exposes a shared
    # library (an extension module of this interpreter is one).
    def library() -> None:
        shutil.copyfile(_ctypes.__file__, lab.data / "libdemo.so")

    lab.setup(library)
    code = lab.probe(
        "import numpy.ctypeslib\nnumpy.ctypeslib.load_library('libdemo.so', DATA)\nprint('DONE')\n"
    )
    assert got(lab.control(code), "DONE")
    result = lab.refused(code, "RuleApiPermissionError")
    assert "Loading a library (ctypes.CDLL, ctypes.cdll) is refused" in result.stdout


SCIENCE = """
import numpy, scipy.integrate, scipy.stats, scipy.io.arff, sympy, pandas
x = sympy.Symbol('x')
area = scipy.integrate.quad(lambda t: t * t, 0, 3)[0]
frame = pandas.DataFrame({'a': numpy.arange(4)})
print('WORKS', sympy.integrate(x ** 2, (x, 0, 3)), round(area, 6),
      int(frame.a.sum()), numpy.linalg.inv(numpy.eye(2))[0, 0],
      numpy.arange(3).ctypes.shape[0], sympy.sqrt(8))
"""


def test_the_scientific_stack_works_without_a_native_grant(lab: Lab) -> None:
    expected = "WORKS 9 9.0 6 1.0 3 2*sqrt(2)"
    assert got(lab.control(SCIENCE), expected)
    result = lab.run_sandboxed(SCIENCE)
    assert got(result, expected), result.stdout + result.stderr


def test_ctypes_type_sizes_match_the_real_ones(lab: Lab) -> None:
    code = (
        "import ctypes, sys\n"
        "class S(ctypes.Structure):\n"
        "    _fields_ = [('a', ctypes.c_char), ('b', ctypes.c_double), ('c', ctypes.c_int * 3)]\n"
        "class U(ctypes.Union):\n"
        "    _fields_ = [('a', ctypes.c_short), ('b', ctypes.c_longlong)]\n"
        "names = ['c_byte', 'c_short', 'c_int', 'c_long', 'c_longlong', 'c_size_t', 'c_float',\n"
        "         'c_double', 'c_longdouble', 'c_void_p', 'c_char_p', 'c_wchar', 'c_bool']\n"
        "sizes = [(ctypes.sizeof(getattr(ctypes, n)), ctypes.alignment(getattr(ctypes, n)))\n"
        "         for n in names]\n"
        "s = S(b'x', 2.5, (1, 2, 3))\n"
        "print('SIZES', sizes, ctypes.sizeof(S), S.b.offset, ctypes.sizeof(U),\n"
        "      ctypes.c_ulong(-1).value, ctypes.c_byte(200).value, s.b, list(s.c),\n"
        "      ctypes.create_string_buffer(b'hi', 4).raw)\n"
    )
    real = lab.control(code).stdout
    assert real.startswith("SIZES"), real
    lab.rules("expose-ro=./data", "python-import=ctypes")
    assert lab.run_sandboxed(code).stdout == real
