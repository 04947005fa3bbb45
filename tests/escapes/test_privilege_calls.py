"""Sensitive calls CPython does not report: the ``privileges`` category.

``os.chroot``, ``os.setuid`` and their kin (``setgroups``, ``setresuid``, ``unshare``,
``setns``...) are registered in the ``privileges`` category, which the rules must grant,
but CPython raises no audit event for them: they ran without any rule. As root,
``chroot`` changes what every path the guards judge means to the kernel (``/proc/self/fd``
included, which the pinned forms rely on). They are now replaced by judged copies, as
``os.setpriority`` is.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import os

import pytest
from escapelab import Lab, got

RULES = ("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")


@pytest.mark.parametrize(
    "call",
    [
        "os.setuid(os.getuid())",
        "os.setgid(os.getgid())",
        "os.setresuid(-1, -1, -1)",
        "posix.setreuid(-1, -1)",
    ],
)
def test_cant_change_identity_without_a_grant(lab: Lab, call: str) -> None:
    lab.rules(*RULES)
    code = lab.probe(f"import posix\n{call}\nprint('DONE')\n")
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RuleApiPermissionError")


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_cant_chroot_without_a_grant(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe("os.chroot(OUT)\nprint('DONE')\n")
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RuleApiPermissionError")


def test_a_grant_still_allows_it(lab: Lab) -> None:
    lab.rules(*RULES, "python-api=ALLOW:privileges")
    code = lab.probe("os.setuid(os.getuid())\nprint('DONE')\n")
    assert got(lab.run_sandboxed(code), "DONE")
