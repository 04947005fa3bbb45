"""A stdio MCP server in the plain pattern (tools awaiting @sandbox functions inside
`with sandboxes():`, no helper), driven by the real client, with mcp 2.x (the test
environment's) and mcp 1.x (a venv of its own): what the sandboxed functions print, on
any stream, must never reach the protocol channel."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcplab import base_env, protocol_lines, server_parameters, text  # type: ignore[import-not-found]

pytest.importorskip("mcp")
PLAIN = Path(__file__).resolve().with_name("plain_stdio")


@asynccontextmanager
async def plain_server(python: str, where: Path) -> AsyncIterator[Any]:
    from mcp import ClientSession, stdio_client

    copy = where / "stdout.copy"
    with (where / "stderr.log").open("w") as errlog:
        params = server_parameters([python, "server.py"], where, copy, base_env())
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def _served(python: str, tmp_path: Path) -> tuple[list[str], list[dict[str, Any]], str]:
    where = tmp_path / "plain"
    shutil.copytree(PLAIN, where, ignore=shutil.ignore_patterns("__pycache__"))
    answers: list[str] = []

    async def session() -> None:
        # A corrupted channel leaves the client waiting for an answer: fail, not hang.
        with anyio.fail_after(60):
            async with plain_server(python, where) as client:
                for tool, word in (("shout", "Hello"), ("whisper", "QUIET"), ("shout", "again")):
                    answers.append(text(await client.call_tool(tool, {"text": word})))

    anyio.run(session)
    messages = protocol_lines(where / "stdout.copy")  # json.loads of every line
    return answers, messages, (where / "stderr.log").read_text()


@pytest.mark.parametrize("sdk", ["mcp 2.x", "mcp 1.x"])
def test_cant_corrupt_a_plain_stdio_servers_channel_by_printing_in_a_sandboxed_tool(
    sdk: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    python = sys.executable if sdk == "mcp 2.x" else request.getfixturevalue("mcp1_python")
    version = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert version.startswith("2." if sdk == "mcp 2.x" else "1."), version
    answers, messages, errors = _served(python, tmp_path)
    assert answers == ["HELLO", "quiet", "AGAIN"]
    # Every byte on the channel was a JSON-RPC message (protocol_lines parsed them all),
    # and the output went to standard error, whole, the unfinished line included.
    assert all(message["jsonrpc"] == "2.0" for message in messages)
    for said in ("shouting Hello", "raw bytes on descriptor 1", "a word on stderr"):
        assert said in errors
    assert "whispering QUIET" in errors
    assert "and more" in errors
    assert "shouting again" in errors
