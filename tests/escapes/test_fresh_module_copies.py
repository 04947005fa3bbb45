"""A fresh ``_imp``: the unjudged ``create_dynamic`` made again.

The sandbox replaces ``_imp.create_dynamic`` and ``create_builtin`` by judged copies, so
that a module made from a spec is judged like an import. But ``_imp`` itself could be
made again: removed from ``sys.modules``, it was imported afresh by the next library
asking for it (``import asyncio`` needs no rule, and loads ``inspect``, then
``importlib``, which imports ``_imp``), and the fresh module held the original
functions. With them the program made ``_ctypes`` without a ``native`` grant, or a fresh
``_posixsubprocess`` whose ``fork_exec`` ran programs without a ``process-exec`` grant.
``_imp`` is now one of the modules that cannot be made again, and so is ``_socket``,
whose fresh copy looked up the names of the rules afresh instead of from their pins.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import pytest
from escapelab import Lab, got

RULES = ("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess", "python-import=json")

FRESH_IMP = """\
sys.modules.pop('_imp')
for name in [n for n in sys.modules if n == 'importlib' or n.startswith('importlib.')]:
    del sys.modules[name]
import asyncio
imp = sys.modules['_imp']
spec = sys.modules['_frozen_importlib'].ModuleSpec
dynload = sys.base_prefix + '/lib/python%d.%d/lib-dynload/' % sys.version_info[:2]
suffix = sys.modules['_frozen_importlib_external'].EXTENSION_SUFFIXES[0]
"""


@pytest.mark.parametrize("module", ["_ctypes", "_posixsubprocess"])
def test_cant_make_imp_again(lab: Lab, module: str) -> None:
    lab.rules(*RULES)
    body = FRESH_IMP + (
        f"made = imp.create_dynamic(spec({module!r}, None, origin=dynload + {module!r} + suffix))\n"
        "print('DONE', made)\n"
    )
    code = lab.probe(body, imports="sys")
    assert got(lab.control(code), "DONE")
    lab.refused(code, ("RuleApiPermissionError", "RuleModuleNotFoundError"))


def test_cant_run_a_program_through_a_fresh_fork_exec(lab: Lab) -> None:
    lab.rules(*RULES)
    body = FRESH_IMP + (
        "made = imp.create_dynamic(spec('_posixsubprocess', None,"
        " origin=dynload + '_posixsubprocess' + suffix))\n"
        "os = sys.modules['os']\n"
        "done = os.path.join(OUT, 'ran')\n"
        "made.fork_exec([b'/bin/touch', done.encode()], [b'/bin/touch'], True, (), None, None,"
        " -1, -1, -1, -1, -1, -1, *os.pipe(), True, False, -1, None, None, None, -1, None,"
        " False)\n"
        "import time\n"
        "for _ in range(100):\n"
        "    if os.path.exists(done): break\n"
        "    time.sleep(0.05)\n"
        "print('DONE' if os.path.exists(done) else 'NOT RUN')\n"
    )
    code = lab.probe(body, imports="sys")
    assert got(lab.control(code), "DONE")
    lab.refused(code, ("RuleApiPermissionError", "RuleModuleNotFoundError"))


def test_cant_make_socket_again_to_lose_the_pins(lab: Lab) -> None:
    # A fresh _socket held the system's getaddrinfo instead of the one answering the
    # names of the rules from their pinned addresses (DNS rebinding).
    lab.rules(*RULES, "python-import=socket", "net=ALLOW|tcp|localhost|443|OUT")
    body = (
        "import socket as first\n"
        "sys.modules.pop('_socket'); sys.modules.pop('socket', None)\n"
        "import socket\n"
        "print('DONE', socket._socket is not first._socket)\n"
    )
    code = lab.probe(body, imports="sys")
    assert got(lab.control(code), "DONE True")
    lab.refused(code, "RuleApiPermissionError")
