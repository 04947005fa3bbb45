"""Files opened in C: POSIX shared memory (``_posixshmem``).

``multiprocessing.shared_memory`` opens, creates, truncates and removes files of
``/dev/shm`` through ``_posixshmem.shm_open`` and ``shm_unlink``, which CPython does not
report: a program read, emptied or removed the shared memory of any process of the same
user, and created files there. Judged copies stand in for both now (``/dev/shm/<name>``
is judged by the file rules, ``expose-rw=/dev/shm`` opts in, as under the kernel layer),
and ``_posixshmem`` cannot be made again.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from escapelab import Lab, got

RULES = ("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
SHM = Path("/dev/shm")

pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm")


@pytest.fixture
def victim() -> Iterator[Path]:
    """Shared memory of another program of the same user."""
    path = SHM / f"pysandboxes-victim-{uuid.uuid4().hex}"
    yield path
    if path.exists():
        path.unlink()


PROBES = {
    "read": "print(os.read(_posixshmem.shm_open(NAME, os.O_RDONLY), 64)); print('DONE')",
    "truncate": "_posixshmem.shm_open(NAME, os.O_RDWR | os.O_TRUNC); print('DONE')",
    "unlink": "_posixshmem.shm_unlink(NAME); print('DONE')",
    "fresh_copy": (
        "import importlib.util\n"
        "spec = importlib.util.find_spec('_posixshmem')\n"
        "fresh = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(fresh)\n"
        "fresh.shm_unlink(NAME); print('DONE')"
    ),
}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_cant_reach_shared_memory_outside_the_rules(lab: Lab, victim: Path, probe: str) -> None:
    lab.rules(*RULES)
    lab.setup(lambda: victim.write_text(lab.secret + "\n"))
    code = lab.probe(f"NAME = '/{victim.name}'\n{PROBES[probe]}", imports="os, sys, _posixshmem")
    control = lab.control(code)
    assert got(control, "DONE"), control.stdout + control.stderr
    assert lab.secret in control.stdout or not victim.exists() or not victim.read_text()

    def photograph() -> object:
        return (lab.state(), victim.exists() and victim.read_text())

    lab.refused(code, ("RuleFileNotFoundError", "RuleApiPermissionError"), watch=photograph)


def test_cant_create_shared_memory_outside_the_rules(lab: Lab) -> None:
    lab.rules(*RULES)
    name = f"pysandboxes-new-{uuid.uuid4().hex}"
    code = lab.probe(
        f"_posixshmem.shm_open('/{name}', os.O_CREAT | os.O_RDWR, 0o600); print('DONE')",
        imports="os, sys, _posixshmem",
    )
    try:
        assert got(lab.control(code), "DONE")
        os.unlink(SHM / name)
        lab.refused(code, "RuleFileNotFoundError")
        assert not (SHM / name).exists()
    finally:
        if (SHM / name).exists():
            os.unlink(SHM / name)


def test_shared_memory_opts_in_with_a_rule(lab: Lab) -> None:
    lab.rules(*RULES, "expose-rw=/dev/shm", "python-import=*")
    name = f"pysandboxes-mine-{uuid.uuid4().hex}"
    code = lab.probe(
        f"""
        fd = _posixshmem.shm_open('/{name}', os.O_CREAT | os.O_RDWR, mode=0o600)
        os.write(fd, b'shared')
        print('READ', os.pread(_posixshmem.shm_open('{name}', os.O_RDONLY), 6, 0))
        _posixshmem.shm_unlink('/{name}')
        """,
        imports="os, sys, _posixshmem",
    )
    result = lab.run_sandboxed(code)
    assert "READ b'shared'" in result.stdout, result.stdout + result.stderr
    assert not (SHM / name).exists()
