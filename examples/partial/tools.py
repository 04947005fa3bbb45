"""The tools of examples/partial/app.py: each runs in the sandboxed child."""

import os
from pathlib import Path

from pysandboxes import sandbox

DATA = Path(__file__).parent.parent / "data"


@sandbox
def greeting() -> str:
    return (DATA / "greeting.txt").read_text().strip()


@sandbox
def steal_token() -> str | None:
    return os.environ.get("DEMO_API_TOKEN")


@sandbox
def list_ssh_keys() -> list[str]:
    return sorted(p.name for p in (Path.home() / ".ssh").iterdir())
