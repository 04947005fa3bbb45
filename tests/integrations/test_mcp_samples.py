"""The MCP samples (examples/mcp), driven by the real stdio client of the `mcp` package.

Each server is started as a client starts it, through stdio_tap.py, which keeps a copy of
its standard output: after every session, each line there must be a JSON-RPC message
(nothing a tool or the sandbox prints reaches the protocol). The calculator runs in
complete mode (`python-sb server.py`); the fetcher in partial mode (`python server.py`,
its tools in sandboxed children).
"""

from __future__ import annotations

import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcplab import (  # type: ignore[import-not-found]
    PYTHON_SB,
    Pages,
    base_env,
    pages,
    protocol_lines,
    sample,
    server_parameters,
    text,
)

pytest.importorskip("mcp")
TOKEN = "tok-4c1d-never-seen-by-tools"
FETCHER = [sys.executable, "server.py"]


@asynccontextmanager
async def connected(command: list[str], cwd: Path, env: dict[str, str]) -> AsyncIterator[Any]:
    from mcp import ClientSession, stdio_client

    copy = cwd / "stdout.copy"
    with (cwd / "stderr.log").open("w") as errlog:
        params = server_parameters(command, cwd, copy, {**base_env(), **env})
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    assert protocol_lines(copy), "the server wrote nothing"  # and every line is JSON-RPC


def drive(function: Callable[[], Coroutine[Any, Any, None]]) -> None:
    anyio.run(function)


# -- complete mode: the calculator under python-sb ---------------------------------------


@pytest.fixture
def calculator(tmp_path: Path) -> Path:
    return sample("calculator", tmp_path)


def test_calculator_lists_its_tools_with_their_schemas_and_computes_exactly(
    calculator: Path,
) -> None:
    async def client() -> None:
        async with connected([PYTHON_SB, "server.py"], calculator, {}) as session:
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(listed) == {"compute", "exact_fraction"}
            assert listed["compute"].input_schema["required"] == ["code"]
            assert "sympy" in (listed["compute"].description or "")
            fraction = await session.call_tool(
                "compute", {"code": "Fraction(1, 3) + Fraction(1, 6)"}
            )
            assert (fraction.is_error, text(fraction)) == (False, "1/2")
            code = "x = symbols('x')\nintegrate(x**2, x)"
            symbolic = await session.call_tool("compute", {"code": code})
            assert text(symbolic) == "x**3/3"
            seventh = await session.call_tool("exact_fraction", {"numerator": 2, "denominator": 14})
            assert text(seventh).startswith("1/7 = 0.142857142857")

    drive(client)


def test_generated_code_reaching_os_through_sympy_gets_a_tool_error_naming_the_rule(
    calculator: Path,
) -> None:

    sys.path.insert(0, str(calculator))
    try:
        import evaluate  # type: ignore[import-not-found]

        # Control: outside the sandbox the walker lets this code list /etc.
        listed = evaluate.run("sympy.utilities.misc.os.listdir('/etc')", evaluate.namespace())
        assert "passwd" in listed  # type: ignore[operator]
    finally:
        sys.path.remove(str(calculator))
        sys.modules.pop("evaluate", None)

    async def client() -> None:
        async with connected([PYTHON_SB, "server.py"], calculator, {}) as session:
            code = "sympy.utilities.misc.os.listdir('/etc')"
            refused = await session.call_tool("compute", {"code": code})
            assert refused.is_error
            assert "Reading '/etc' is refused" in text(refused)
            assert "Add 'expose-ro=/etc' to .py-sandboxes" in text(refused)
            mistake = await session.call_tool("compute", {"code": "__import__('os')"})
            assert (mistake.is_error, "unknown name '__import__'" in text(mistake)) == (True, True)
            after = await session.call_tool("compute", {"code": "factor(x**2 - 1)"})
            assert after.is_error  # x is not defined: each call starts afresh
            again = await session.call_tool("compute", {"code": "2**100"})
            assert text(again) == str(2**100)  # the server goes on

    drive(client)


# -- partial mode: the fetcher, its tools in sandboxed children ---------------------------


@pytest.fixture
def fetcher(tmp_path: Path) -> Path:
    return sample("partial", tmp_path)


@pytest.fixture
def served() -> Any:
    with pages() as local:
        yield local


def fetcher_env(served: Pages) -> dict[str, str]:
    return {"PAGES_PORT": str(served.allowed), "NOTES_API_TOKEN": TOKEN}


def test_fetch_url_reaches_the_named_host_and_a_tool_error_names_the_rule_for_another(
    fetcher: Path, served: Pages
) -> None:
    other = f"http://127.0.0.1:{served.other}/secret"
    with urllib.request.urlopen(other) as control:  # plain Python reaches the other port
        assert control.read() == f"page /secret of port {served.other}".encode()
    served.requests.clear()

    async def client() -> None:
        async with connected(
            [sys.executable, "server.py"], fetcher, fetcher_env(served)
        ) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert names == {"fetch_url", "calculate", "token_configured"}
            page = await session.call_tool(
                "fetch_url", {"url": f"http://127.0.0.1:{served.allowed}/a"}
            )
            assert (page.is_error, text(page)) == (False, f"page /a of port {served.allowed}")
            refused = await session.call_tool("fetch_url", {"url": other})
            assert refused.is_error
            assert f"net=ALLOW|tcp|127.0.0.1|{served.other}|OUT" in text(refused), text(refused)
            configured = await session.call_tool("token_configured", {})
            assert text(configured) == "true"  # the server has its token

    drive(client)
    assert [port for port, _, _ in served.requests] == [served.allowed]  # none on the other
    assert not any(TOKEN in headers for _, _, headers in served.requests)
    assert "fetching http://127.0.0.1" in (fetcher / "stderr.log").read_text()  # not stdout


def test_calculate_computes_and_a_call_past_its_timeout_is_stopped(
    fetcher: Path, served: Pages
) -> None:
    async def client() -> None:
        async with connected(
            [sys.executable, "server.py"], fetcher, fetcher_env(served)
        ) as session:
            exact = await session.call_tool("calculate", {"expression": "1/3 + 1/6"})
            assert text(exact) == "1/2"
            huge = await session.call_tool("calculate", {"expression": "9**9**9"})
            assert huge.is_error
            assert "did not finish within 2 s" in text(huge), text(huge)
            after = await session.call_tool("calculate", {"expression": "2**10"})
            assert text(after) == "1024"  # a fresh child serves the next call

    drive(client)


def test_a_call_the_client_cancels_is_cancelled_in_the_sandbox(
    fetcher: Path, served: Pages
) -> None:
    hang = f"http://127.0.0.1:{served.allowed}/hang"

    def reached() -> None:
        while not any(path == "/hang" for _, path, _ in served.requests):
            time.sleep(0.05)

    async def client() -> None:
        async with connected(
            [sys.executable, "server.py"], fetcher, fetcher_env(served)
        ) as session:
            async with anyio.create_task_group() as calls:
                calls.start_soon(session.call_tool, "fetch_url", {"url": hang})
                with anyio.fail_after(60):
                    await anyio.to_thread.run_sync(reached)
                calls.cancel_scope.cancel()  # the client gives the call up
            # The sandboxed child was stopped: its connection to the page closed.
            assert await anyio.to_thread.run_sync(served.hung_up.wait, 60)
            page = await session.call_tool(
                "fetch_url", {"url": f"http://127.0.0.1:{served.allowed}/b"}
            )
            assert text(page) == f"page /b of port {served.allowed}"

    drive(client)


# -- permission prompts: the tool asks the client's user (elicitation) ---------------------


@pytest.mark.parametrize("sdk", ["mcp 2.x", "mcp 1.x"])
def test_a_refused_read_is_asked_of_the_client_user_accept_once_then_decline(
    tmp_path: Path, sdk: str, request: pytest.FixtureRequest
) -> None:
    # The server runs on either SDK (mcp 1.x: a venv of its own); the client is the
    # test environment's.
    from mcp import ClientSession, stdio_client, types

    python = request.getfixturevalue("mcp1_python") if sdk == "mcp 1.x" else sys.executable
    notes = sample("prompts", tmp_path)
    note = tmp_path / "note.txt"
    note.write_text("dear diary")
    assert note.read_text() == "dear diary"  # the positive control: the client reads it
    asked: list[str] = []
    answers = [
        types.ElicitResult(action="accept", content={"allow": True}),
        types.ElicitResult(action="decline"),
    ]

    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return answers[len(asked) - 1]

    async def client() -> None:
        copy = notes / "stdout.copy"
        with (notes / "stderr.log").open("w") as errlog:
            params = server_parameters([python, "server.py"], notes, copy, base_env())
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, elicitation_callback=elicit) as session,
            ):
                await session.initialize()
                allowed = await session.call_tool("read_note", {"path": str(note)})
                assert (allowed.is_error, text(allowed)) == (False, "dear diary")
                declined = await session.call_tool("read_note", {"path": str(note)})
                assert declined.is_error
                assert f"expose-ro={note}" in text(declined), text(declined)
        assert protocol_lines(copy)

    drive(client)
    assert asked == [f"The tool wants to read {note}. Allow it once?"] * 2
