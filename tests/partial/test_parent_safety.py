"""The application is safe from its sandboxed child: a hostile ``@sandbox`` function
reaches none of the application's descriptors, and what it sends back costs the
application bounded work, whatever bytes it chose (``docs/security.md``, partial mode).

Each probe is first shown to work without the sandbox (a plain subprocess, plain
``pickle``, a plain class): the positive control. Hostile replies are crafted by hand,
opcode by opcode, as a child bypassing its own encoder would write them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from partiallab import App  # type: ignore[import-not-found]

from pysandboxes._host.select import unavailable_reason

PROVIDERS = ("landlock", "unshare", "bwrap")

PROBE = """
import errno, os
def probe():
    seen = []
    try:
        seen.append(os.pread(40, 100, 0).decode())
    except OSError as exc:
        seen.append(errno.errorcode[exc.errno])
    try:
        os.write(41, b"written through fd 41")
        seen.append("wrote")
    except OSError as exc:
        seen.append(errno.errorcode[exc.errno])
    return seen
"""


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_use_the_applications_inherited_descriptors(
    app: App, tmp_path: Path, provider: str
) -> None:
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider}: {reason}")
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("s3cr3t")
    victim = app.project / "victim.txt"
    victim.write_text("original")
    (app.project / ".py-sandboxes").write_text(
        f"python-import=os, errno\nexpose-rw=./victim.txt\nos-sandbox={provider}\n"
    )
    result = app.run(
        f"""
        import os, subprocess, sys
        import tools
        from pysandboxes import sandboxes
        # Inheritable, as os.dup2 makes them (or a shell, or systemd, passes them).
        os.dup2(os.open({str(secret)!r}, os.O_RDONLY), 40)
        os.dup2(os.open("victim.txt", os.O_WRONLY | os.O_APPEND), 41)
        control = subprocess.run(
            [sys.executable, "-c", tools.PROBE + "print(probe())"],
            close_fds=False, capture_output=True, text=True, check=True,
        )
        print("control", control.stdout.strip())
        with open("victim.txt", "w") as handle:
            handle.write("original")
        with sandboxes():
            print("sandboxed", tools.probe())
        print("victim", open("victim.txt").read())
        os.pread(40, 1, 0), os.fstat(41)  # the application's own are untouched
        """,
        f"from pysandboxes import sandbox\nPROBE = {PROBE!r}\n{PROBE}\nprobe = sandbox(probe)\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "control ['s3cr3t', 'wrote']",
        "sandboxed ['EBADF', 'EBADF']",
        "victim original",
    ]
