"""Real programs learn once, then replay silently from a clean checkout elsewhere.

Each test runs a program of ``programs/`` with plain Python, learns it in a fresh copy of
its project, then replays it enforced in a fresh copy at another path under every kernel
provider the machine has (see corpuslab). It checks that every output is plain Python's,
that no replay refuses anything, that the learned rules are exactly the expected ones (no
rule wider than the program's use), portable (no absolute path of this machine's home,
venv or interpreter), and that none grants native code or dynamic code.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from corpuslab import Corpus, Outcome

from runner import Runner

EXPECTED: dict[str, set[str]] = {
    "sqlite": {
        "expose-rw=./notes.db",
        # Made by SQLite in C beside the database: learned with it, in both modes.
        "expose-rw=./notes.db-journal",
        "expose-rw=./notes.db-shm",
        "expose-rw=./notes.db-wal",
        "python-import=sqlite3",
    },
    "logs_archives": {
        "expose-rw=./app.log",
        "expose-rw=./app.log.1",
        "expose-rw=./app.log.2",
        "expose-rw=./cache.bak",
        "expose-rw=./cache.dat",
        "expose-rw=./cache.dir",
        "expose-rw=./out.tar.gz",
        "expose-rw=./out.zip",
        "expose-rw=./report.txt",
        "python-import=logging",
        "python-import=shelve",
        "python-import=tarfile",
        "python-import=zipfile",
    },
    "data_folder": {"expose-ro=./d", "python-import=os"},
    "pool-fork": {
        "expose-rw=/dev/shm",
        "python-import=multiprocessing",
        "python-api=ALLOW:os.fork",
        "python-api=ALLOW:pickle.loads",
    },
    "pool-spawn": {
        "expose-rw=/dev/shm",
        "python-import=multiprocessing",
        "python-api=ALLOW:subprocess.Popen",  # the interpreter, started again
    },
    "futures": {
        "expose-rw=/dev/shm",
        "python-import=concurrent",
        "python-api=ALLOW:os.fork",
        "python-api=ALLOW:pickle.loads",
        "python-api=ALLOW:subprocess.Popen",
    },
    "web_server": {
        "env=LC_ALL=${LC_ALL}",
        "net=ALLOW|tcp|127.0.0.1|PORT|IN",
        "net=ALLOW|tcp|127.0.0.1|PORT|OUT",
        "python-import=anyio",
        "python-import=certifi",  # httpx's certificates
        "python-import=fastapi",
        "python-import=logging",
        "python-import=pydantic",
        "python-import=pydantic_core",
        "python-import=httpx",
        "python-import=threading",
        "python-import=time",
        "python-import=uvicorn",
    },
    "http_client": {
        "net=ALLOW|tcp|127.0.0.1|PORT|OUT",
        "python-import=certifi",
        "python-import=charset_normalizer",
        "python-import=httpx",
        "python-import=requests",
    },
    "mcp_server": {
        "env=HOME=${HOME}",  # the SDK's client hands the server HOME, and pydantic reads it
        "env=LC_ALL=${LC_ALL}",
        "python-import=anyio",
        "python-import=mcp",
        "python-import=pydantic",
        "python-import=pydantic_core",
    },
    "calculator": {
        "expose-ro=/usr/share/zoneinfo/Etc/UTC",  # dateutil, for pandas
        "expose-ro=/usr/share/zoneinfo/UTC",  # the link dateutil opens it by
        "python-import=dateutil",
        "python-import=numpy",
        "python-import=pandas",
        "python-import=scipy",
        "python-import=sympy",
    },
    "click_cli": {"env=LC_ALL=${LC_ALL}", "python-import=click"},
    "pandas_io": {
        "expose-ro=./stations.csv",
        "expose-ro=/usr/share/zoneinfo/Etc/UTC",  # dateutil, for pandas
        "expose-ro=/usr/share/zoneinfo/UTC",  # the link dateutil opens it by
        "expose-rw=./rain.csv",
        "expose-rw=./rain.json",
        "python-import=dateutil",
        "python-import=numpy",
        "python-import=pandas",
    },
    "out_folder": {
        "expose-rw=./out/",  # made again by a replay in a clean checkout
        "python-import=json",
        "python-import=os",
        "python-import=shutil",
        "python-import=zipfile",
    },
    "interpreter_names": {
        "python-import=os",
        "python-import=platform",
        "python-import=sysconfig",
    },
    "pytest_project": {
        "env=LC_ALL=${LC_ALL}",
        "env=PYTEST_DISABLE_PLUGIN_AUTOLOAD=${PYTEST_DISABLE_PLUGIN_AUTOLOAD}",
        "expose-ro=.",  # pytest lists its root directory
        "python-import=_pytest",
        "python-import=pkg",
        "python-import=pytest",
        "python-import=check_calc",
    },
}

if sys.version_info >= (3, 13):
    # 3.13's shelve keeps its data in SQLite (dbm.sqlite3), with SQLite's companions.
    EXPECTED["logs_archives"] -= {f"expose-rw=./cache.{end}" for end in ("bak", "dat", "dir")}
    EXPECTED["logs_archives"] |= {
        f"expose-rw=./cache{end}" for end in ("", "-journal", "-shm", "-wal")
    }
    # 3.13's subprocess starts children with posix_spawn where it can (asyncio's too).
    EXPECTED["futures"].add("python-api=ALLOW:os.posix_spawn")


@pytest.fixture
def corpus(python_sb: str, tmp_path: Path) -> Corpus:
    from pysandboxes._kernel.landlock import abi_version

    if abi_version() == 0:
        pytest.skip("the corpus runs under the Landlock kernel layer, which this kernel lacks")
    return Corpus(python_sb, tmp_path)


def test_sqlite_in_rollback_mode_keeps_its_journal(corpus: Corpus) -> None:
    outcome = corpus.learn_then_enforce("sqlite_app", "app.py", "rollback")
    outcome.check(EXPECTED["sqlite"])


def test_sqlite_in_wal_mode_keeps_its_wal_and_shared_memory(corpus: Corpus) -> None:
    outcome = corpus.learn_then_enforce("sqlite_app", "app.py", "wal")
    outcome.check(EXPECTED["sqlite"])


def test_logs_shelves_and_archives_are_made_again_in_a_clean_checkout(corpus: Corpus) -> None:
    outcome = corpus.learn_then_enforce("logs_archives", "app.py")
    outcome.check(EXPECTED["logs_archives"])


def _data_folder(project: Path) -> None:
    folder = project / "d"
    folder.mkdir()
    for i in range(25000):
        (folder / f"f{i}.txt").write_text(str(i))


def test_a_data_folder_of_25000_files_is_one_rule(corpus: Corpus) -> None:
    outcome = corpus.learn_then_enforce("data_folder", "count.py", prepare=_data_folder)
    outcome.check(EXPECTED["data_folder"])
    assert "25000 files below it read" in outcome.rule_file.read_text(), outcome.shown()
    assert len(outcome.learned.stderr.splitlines()) < 15, outcome.shown()  # a short summary


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_multiprocessing_pool_runs_as_it_learned(corpus: Corpus, method: str) -> None:
    outcome = corpus.learn_then_enforce("pool", "pool.py", method)
    outcome.check(EXPECTED[f"pool-{method}"])


def test_process_pools_and_asyncio_subprocesses_run_as_they_learned(corpus: Corpus) -> None:
    outcome = corpus.learn_then_enforce("futures", "work.py")
    outcome.check(EXPECTED["futures"])


def test_a_click_command_line(corpus: Corpus) -> None:
    outcome = corpus.learn_then_enforce(
        "click_cli", "cli.py", "greet", "--name", "Ada", "--count", "2"
    )
    outcome.check(EXPECTED["click_cli"])
    # The rules learned from one command serve its --help too, in every replay's copy.
    plain = Runner([sys.executable], corpus.root / "plain" / "click_cli")("cli.py", "--help")
    assert "greet" in plain.stdout
    for provider in corpus.providers:
        copy = corpus.root / "elsewhere" / provider / "checkout" / "click_cli"
        shown = Runner([corpus.python_sb], copy)("cli.py", "--help", env={"OS_SANDBOX": provider})
        assert shown.stdout == plain.stdout, shown.stderr
        assert "refused" not in shown.stderr, shown.stderr


def test_a_numpy_scipy_sympy_pandas_calculator(corpus: Corpus) -> None:
    outcome = corpus.learn_then_enforce("calculator", "calc.py")
    outcome.check(EXPECTED["calculator"])


def _timing(text: str) -> str:
    return re.sub(r" in [0-9.]+s", " in Ns", text)


def test_a_pytest_run_of_a_small_project(corpus: Corpus) -> None:
    # The plugins installed beside pytest are not the project's: only pytest's own load.
    # Its cache is made under a name drawn per run, then renamed: no rule can name it
    # beside a rule file (see docs/faq.md), so this run goes without it.
    outcome = corpus.learn_then_enforce(
        "pytest_project",
        *("-m", "pytest", "-q", "-p", "no:cacheprovider"),
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    outcome.check(EXPECTED["pytest_project"], _timing)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_fastapi_server_answers_on_loopback(corpus: Corpus) -> None:
    port = _free_port()
    outcome = corpus.learn_then_enforce("web_server", "server.py", str(port))
    expected = {rule.replace("PORT", str(port)) for rule in EXPECTED["web_server"]}
    outcome.check(expected)


class _Status(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"status": "ok", "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def status_server() -> Iterator[int]:
    """A local HTTP server answering JSON, on a loopback port of its own."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_requests_and_httpx_clients_of_a_local_server(corpus: Corpus, status_server: int) -> None:
    outcome = corpus.learn_then_enforce("http_client", "client.py", str(status_server))
    expected = {rule.replace("PORT", str(status_server)) for rule in EXPECTED["http_client"]}
    outcome.check(expected)


async def _ask_mcp(command: str, project: Path, env: dict[str, str], *options: str) -> str:
    """Call the server's tool with the SDK's own stdio client; its answer, then stderr."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", **env}
    params = StdioServerParameters(
        command=command, args=[*options, "server.py"], cwd=str(project), env=env
    )
    with tempfile.TemporaryFile("w+") as errors:
        async with stdio_client(params, errlog=errors) as (read, write):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool("add", {"a": 2, "b": 3})
        answer = f"{[tool.name for tool in tools.tools]} {result.content[0]}\n"
        errors.seek(0)
        return answer + "\0" + errors.read()


def _mcp_run(answer: str) -> subprocess.CompletedProcess[str]:
    stdout, _, stderr = answer.partition("\0")
    return subprocess.CompletedProcess([], 0, stdout, stderr)


def test_an_mcp_server_answers_its_stdio_client(corpus: Corpus, python_sb: str) -> None:
    import anyio

    plain = anyio.run(_ask_mcp, sys.executable, corpus.copy("mcp_server", "plain", None), {})
    first = corpus.copy("mcp_server", "learn", None)
    learned = anyio.run(_ask_mcp, python_sb, first, {}, "--learn")
    enforced: dict[str, subprocess.CompletedProcess[str]] = {}
    for provider in corpus.providers:
        second = corpus.replay_copy("mcp_server", provider, None)
        rule_file = corpus.hand_over(first, second)
        answer = anyio.run(_ask_mcp, python_sb, second, {"OS_SANDBOX": provider})
        enforced[provider] = _mcp_run(answer)
    outcome = Outcome(_mcp_run(learned), enforced, first / ".py-sandboxes", _mcp_run(plain))
    outcome.check(EXPECTED["mcp_server"])
    assert rule_file.exists()


def _stations(project: Path) -> None:
    (project / "stations.csv").write_text(
        "name,country,height_m\nBergen,NO,12\nTromso,NO,100\nCusco,PE,3399\n"
    )


def test_pandas_reads_and_writes_csv_and_json(corpus: Corpus) -> None:
    outcome = corpus.learn_then_enforce("pandas_io", "tables.py", prepare=_stations)
    outcome.check(EXPECTED["pandas_io"])


def test_a_folder_made_at_run_time_is_made_again_by_a_replay(corpus: Corpus) -> None:
    outcome = corpus.learn_then_enforce("out_folder", "build.py")
    outcome.check(EXPECTED["out_folder"])
    # The rule file's directory stays closed: the folder is granted, not its parent.
    assert "expose-rw=." not in outcome.rules, outcome.shown()


def test_a_program_started_through_the_interpreters_linked_names(corpus: Corpus) -> None:
    # bin/python3 -> python -> the installation's python3 -> python3.11: each a link.
    linked = Path(sys.executable).with_name("python3")
    assert linked.is_symlink()
    outcome = corpus.learn_then_enforce(
        "interpreter_names", "where.py", launcher=[str(linked), "-m", "python_sb"]
    )
    outcome.check(EXPECTED["interpreter_names"])


@pytest.fixture
def other_venv(tmp_path: Path, wheels_dir: Path) -> Path:
    """A venv of the same interpreter at another path, made as a user would (the standard
    library's venv), with the two wheels and click installed into it, offline."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed: run scripts/test, which installs it")
    venv = tmp_path / "another" / "place" / "env"
    base = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}")
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    wheels = sorted(str(wheel) for wheel in wheels_dir.glob("*.whl"))
    installed = subprocess.run(
        [uv, "pip", "install", "--offline", "--quiet", "--python", str(venv / "bin" / "python"),
         *wheels, "click"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    return venv


def test_learned_rules_replay_with_another_venv_at_another_path(
    corpus: Corpus, other_venv: Path
) -> None:
    # The rules are learned with the test's venv; the project then moves, and another
    # venv (another prefix, another python-sb) enforces them.
    args = ("cli.py", "greet", "--name", "Ada", "--count", "2")
    replayer = [str(other_venv / "bin" / "python-sb")]
    outcome = corpus.learn_then_enforce("click_cli", *args, replayer=replayer)
    outcome.check(EXPECTED["click_cli"])
    assert str(other_venv) not in outcome.rule_file.read_text()


@pytest.fixture
def busy_cpu() -> Iterator[None]:
    """Another process spinning on a CPU while the test runs: timing-dependent learning or
    enforcing (a worker late, a server slow to bind) shows as a refusal here."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        burner.kill()
        burner.wait()


@pytest.mark.slow
@pytest.mark.parametrize("program", ["pool", "web_server"])
def test_pools_and_servers_replay_ten_times_in_a_row_under_load(
    corpus: Corpus, busy_cpu: None, program: str
) -> None:
    name, args, expected = {
        "pool": ("pool", ["pool.py", "spawn"], EXPECTED["pool-spawn"]),
        "web_server": ("web_server", ["server.py", str(_free_port())], EXPECTED["web_server"]),
    }[program]
    corpus.providers = corpus.providers[:1]
    outcome = corpus.learn_then_enforce(name, *args)
    port = args[-1]
    outcome.check({rule.replace("PORT", port) for rule in expected})
    for attempt in range(10):
        again = corpus.copy(name, f"again-{attempt}", None)
        corpus.hand_over(outcome.rule_file.parent, again)
        replay = Runner([corpus.python_sb], again)(*args, timeout=240)
        assert replay.returncode == 0, f"replay {attempt}:\n{replay.stderr}"
        assert replay.stdout == outcome.learned.stdout, f"replay {attempt}:\n{replay.stderr}"
        assert "refused" not in replay.stderr, f"replay {attempt}:\n{replay.stderr}"
