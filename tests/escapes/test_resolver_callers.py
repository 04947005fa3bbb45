"""A library calling a resolver decided whose the import was.

``warnings._setoption("ignore::csv.Error")`` imported ``csv`` with no rule:
``warnings._getcategory`` is a known resolver (it imports the module a category names),
but the import guard charged it to its caller, ``warnings._setoption``, a library frame,
and so took the import for the library's own. ``unittest.mock.patch``, ``xml.sax.
make_parser``, ``logging.config.dictConfig`` and ``pydoc.render_doc`` went the same way:
each hands a resolver a name from the program.

Now a resolver chain is judged by the first frame outside the known resolvers and their
library callers, up to the program.
"""

from __future__ import annotations

import pytest
from escapelab import Lab

ROUTES = {
    "warnings_option": ("import warnings\nwarnings._setoption('ignore::csv.Error')", "csv"),
    "mock_patch": ("from unittest import mock\nmock.patch('wave.open').start()", "wave"),
    "sax_parser": ("import xml.sax\nxml.sax.make_parser(['colorsys'])", "colorsys"),
    "logging_handler": (
        "import logging.config\n"
        "logging.config.dictConfig({'version': 1, 'handlers': {'h': {'class': 'zipapp.X'}}})",
        "zipapp",
    ),
    "pydoc_render": ("import pydoc\npydoc.render_doc('mailbox')", "mailbox"),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_cant_import_through_a_library_that_calls_a_resolver(lab: Lab, route: str) -> None:
    call, module = ROUTES[route]
    lab.rules(
        "expose-ro=./data",
        "python-import=warnings",
        "python-import=unittest",
        "python-import=xml",
        "python-import=logging",
        "python-import=pydoc",
    )
    code = (
        "import sys\ntry:\n"
        + "".join(f"    {line}\n" for line in call.splitlines())
        + "except BaseException as exc:\n    print('REFUSED', type(exc).__name__)\n"
        + f"print('LOADED', {module!r} in sys.modules)\n"
    )
    control = lab.control(code)
    assert "LOADED True" in control.stdout, control.stdout + control.stderr
    result = lab.run_sandboxed(code)
    assert "LOADED False" in result.stdout, result.stdout + result.stderr


def test_a_library_importing_for_itself_needs_no_rule(lab: Lab) -> None:
    # Its own import statements (and C importing a loaded module for it) stay its own.
    lab.rules("expose-ro=./data", "python-import=email", "python-import=json")
    code = (
        "import email.parser, json\n"
        "print('PARSED', email.parser.Parser().parsestr('A: b\\n\\nx')['A'], json.dumps(1))\n"
    )
    result = lab.run_sandboxed(code)
    assert "PARSED b 1" in result.stdout, result.stdout + result.stderr
