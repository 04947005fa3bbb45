"""read_note, the tool of server.py: it runs in a sandboxed child under .py-sandboxes,
which exposes no file at all. A read the rules refuse is asked about (server.py)."""

from pysandboxes import sandbox


@sandbox(timeout=120)
async def read_note(path: str) -> str:
    """The text of the file at ``path``."""
    with open(path) as handle:  # noqa: ASYNC230 - one small file, in a child of its own
        return handle.read()
