"""Reverse lookups as a DNS channel.

When the rules allow only named hosts, looking up any other name is refused, so that a
lookup cannot carry data out through DNS. Reverse lookups of an *address* passed:
``socket.gethostbyaddr("2001:db8:5345:4352:4554:2d44:4154:4121")`` sends the DNS server a
PTR query for ``...ip6.arpa`` holding 16 bytes the program chose (4 for IPv4), and
``getnameinfo`` does the same. They are now allowed only for the addresses the rules
name one by one.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from conftest import Runner

RULES = (
    "os-sandbox=subprocess",
    "python-import=socket",
    "net=ALLOW|tcp|localhost|443|OUT",
    "net=ALLOW|tcp|127.0.0.1|443|OUT",
)

PROBE = """\
import socket
try:
    print('DONE', {call})
except (socket.herror, socket.gaierror) as exc:
    print('DONE', 'looked up:', exc)
except OSError as exc:
    print('REFUSED', type(exc).__name__, exc)
"""


def rules(project: Path) -> None:
    (project / ".py-sandboxes").write_text("\n".join(RULES) + "\n")


@pytest.mark.parametrize(
    "call",
    [
        "socket.gethostbyaddr('2001:db8:5345:4352:4554:2d44:4154:4121')",
        "socket.gethostbyaddr('10.83.69.67')",
        "socket.getnameinfo(('10.83.69.68', 80), 0)",
        "socket.getnameinfo(('2001:db8::5345', 80, 0, 0), 0)",
    ],
)
def test_cant_look_up_the_name_of_any_address(
    sb: Runner, py: Runner, project: Path, call: str
) -> None:
    rules(project)
    code = PROBE.format(call=call)
    assert "DONE" in py("-c", code).stdout
    result = sb("-c", code, timeout=30)
    assert "REFUSED RuleSocketConnectionRefusedError" in result.stdout, (
        result.stdout + result.stderr
    )
    assert "DONE" not in result.stdout


def test_the_addresses_the_rules_name_may_be_looked_up(sb: Runner, project: Path) -> None:
    rules(project)
    result = sb("-c", PROBE.format(call="socket.gethostbyaddr('127.0.0.1')"), timeout=30)
    assert "DONE" in result.stdout, result.stdout + result.stderr
