"""Attack class 6: environment secrets.

The host environment holds ``API_TOKEN``; no rule forwards it. The sandboxed interpreter
must not have it (``os.environ``, ``/proc/self/environ``, native ``getenv``), and no other
process of the chain may keep it readable (``/proc/<parent>/environ``, its memory).
"""

from __future__ import annotations

import pytest
from escapelab import Lab

ENV_READS = {
    "os_environ": "print('GOT', dict(os.environ))",
    "os_getenv": "print('GOT', os.getenv('API_TOKEN'))",
    "os_environb": "print('GOT', dict(os.environb))",
    "environ_copy": "print('GOT', os.environ.copy())",
    "posix_environ": "import posix\nprint('GOT', posix.environ)",
}

# Reads the process's own environment block and its parent's, as the kernel shows them.
PROC_ENVIRON = """
for pid in ('self', str(os.getppid())):
    try:
        print('GOT', pid, open(f'/proc/{pid}/environ', 'rb').read())
    except OSError as exc:
        print('REFUSED', type(exc).__name__, pid)
"""

# Spawned under a parent holding the secret: the control for "/proc/<parent>/...".
AS_CHILD = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', {code!r}])\n"

# Looks for the value of the token in the readable memory of the parent process. The
# needle is split so that the probe's own text (in the parent's argv) never matches.
PARENT_MEMORY = """
needle = ('SEC' + 'RET-').encode()
hits = set()
ppid = os.getppid()
with open(f'/proc/{ppid}/maps') as maps, open(f'/proc/{ppid}/mem', 'rb', 0) as mem:
    for line in maps:
        span, perms = line.split()[:2]
        if not perms.startswith('r'):
            continue
        start, end = (int(x, 16) for x in span.split('-'))
        try:
            mem.seek(start)
            chunk = mem.read(end - start)
        except (OSError, OverflowError, ValueError):
            continue
        at = chunk.find(needle)
        while at >= 0:
            hits.add(chunk[at:at + 40])
            at = chunk.find(needle, at + 1)
print('GOT', sorted(hits))
"""


@pytest.fixture
def token_lab(lab: Lab) -> Lab:
    lab.env = {"API_TOKEN": lab.secret}
    return lab


@pytest.mark.parametrize("api", list(ENV_READS))
def test_cant_read_env_secret(token_lab: Lab, api: str) -> None:
    lab = token_lab
    code = lab.probe(ENV_READS[api])
    assert lab.secret in lab.control(code).stdout
    result = lab.run_sandboxed(code)
    assert "GOT" in result.stdout, result.stdout + result.stderr
    assert lab.secret not in result.stdout + result.stderr


@pytest.mark.parametrize("rules", [(), ("expose-ro=/proc/self",)], ids=["hidden", "exposed"])
def test_cant_read_env_secret_through_proc_self_environ(
    token_lab: Lab, rules: tuple[str, ...]
) -> None:
    lab = token_lab
    lab.rules("expose-ro=./data", *rules)
    code = lab.probe(PROC_ENVIRON)
    assert lab.secret in lab.control(code).stdout
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert lab.secret not in output, output
    if rules:
        assert "GOT self" in result.stdout, output  # readable, and the secret is not there


def test_cant_read_env_secret_through_parent_proc_environ(token_lab: Lab) -> None:
    # Even with all of /proc readable, the launcher's environment block shows nothing.
    lab = token_lab
    lab.rules("expose-ro=/proc")
    code = lab.probe(PROC_ENVIRON)
    child = AS_CHILD.format(code=code)
    control = lab.control(child)
    parent_lines = [ln for ln in control.stdout.splitlines() if ln.startswith("GOT ")]
    parent_lines = [ln for ln in parent_lines if not ln.startswith("GOT self")]
    assert any(lab.secret in ln for ln in parent_lines), control.stdout  # plain python: yes
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert "GOT " in result.stdout, output
    assert lab.secret not in output, output


def test_cant_read_env_secret_from_parent_memory(token_lab: Lab) -> None:
    # The launcher blanks its environment block but keeps os.environ (a copy on its heap);
    # with /proc readable, /proc/<parent>/mem hands it over (no Yama ptrace restriction
    # on this machine, and the launcher is the sandbox's parent, same user).
    lab = token_lab
    lab.rules("expose-ro=/proc")
    code = lab.probe(PARENT_MEMORY)
    control = lab.control(AS_CHILD.format(code=code))
    assert lab.secret in control.stdout, control.stdout + control.stderr
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert lab.secret not in output, f"the launcher's memory holds the token:\n{output}"


def test_cant_read_env_secret_with_native_getenv(token_lab: Lab) -> None:
    lab = token_lab
    lab.rules("expose-ro=./data", "python-api=ALLOW:native")
    code = lab.probe(
        """
        import ctypes
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_char_p
        print('GOT', libc.getenv(b'API_TOKEN'))
        """
    )
    assert lab.secret in lab.control(code).stdout
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert "GOT None" in result.stdout, output
    assert lab.secret not in output


def test_allowed_env_variable_is_visible(lab: Lab) -> None:
    # The other side of the filter: a forwarded variable arrives, everywhere.
    lab.env = {"ALLOWED": "visible-value", "API_TOKEN": lab.secret}
    lab.rules(
        "expose-ro=./data",
        "expose-ro=/proc/self",
        "python-api=ALLOW:native",
        "env=ALLOWED=${ALLOWED}",
    )
    code = lab.probe(
        """
        import ctypes
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_char_p
        print('ENV', os.environ.get('ALLOWED'), os.getenv('API_TOKEN'))
        print('PROC', b'ALLOWED=visible-value' in open('/proc/self/environ', 'rb').read())
        print('NATIVE', libc.getenv(b'ALLOWED'))
        """
    )
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert "ENV visible-value None" in result.stdout, output
    assert "PROC True" in result.stdout, output
    assert "NATIVE b'visible-value'" in result.stdout, output
    assert lab.secret not in output
