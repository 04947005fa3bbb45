"""Helpers for the policy tests: write rule files, parse them with a fake resolver."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from pysandboxes._policy.model import Policy
from pysandboxes._policy.parser import parse_policy

HOSTS = {
    "localhost": ["127.0.0.1", "::1"],
    "db.internal": ["10.0.0.5"],
    "api.example.test": ["192.0.2.10", "2001:db8::10"],
}


def fake_resolver(host: str) -> list[str]:
    """Known test names only: the tests never touch a real resolver."""
    try:
        return HOSTS[host]
    except KeyError:
        raise OSError(f"unknown test host {host}") from None


Parse = Callable[..., Policy]


@pytest.fixture
def parse(tmp_path: Path) -> Parse:
    """``parse(text, extra=(), env={}, name='.py-sandboxes')`` → Policy, cwd = tmp_path."""

    def run(
        text: str | None,
        extra: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        name: str = ".py-sandboxes",
    ) -> Policy:
        main = None
        if text is not None:
            main = tmp_path / name
            main.write_text(text)
        return parse_policy(
            str(main) if main else None,
            extra_rules=extra,
            cwd=str(tmp_path),
            env=env or {},
            resolve_host=fake_resolver,
        )

    return run
