"""The file judge remembers which exposure covers a path: never another path's answer.

``FileJudge.exposure`` walks a path's parents to find the narrowest rule covering it, and
keeps the answer (the rules never change during a run). A remembered answer must stay the
path's own: a path next to it, above it or below a narrower rule gets its own, and so does
a path judged again once the memory was emptied for being full.
"""

from __future__ import annotations

import pytest

from pysandboxes._policy import judge as judge_module
from pysandboxes._policy.judge import FileJudge
from pysandboxes._policy.model import Access, ExposeRule, Origin


def _rule(path: str, writable: bool, line: int) -> ExposeRule:
    return ExposeRule(path, writable, True, Origin(".py-sandboxes", line, f"rule {line}"))


def test_a_remembered_exposure_never_answers_for_another_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, data = _rule("/srv/app", True, 1), _rule("/srv/app/data", False, 2)
    judge = FileJudge([project, data], [])
    for _ in range(3):  # judged again and again: the same answers, remembered or not
        assert judge.exposure("/srv/app/main.py") is project
        assert judge.exposure("/srv/app/data/in.csv") is data
        assert judge.exposure("/srv/other/secret") is None
        assert judge.judge("/srv/app/data/in.csv", Access.WRITE).allowed is False
        assert judge.judge("/srv/app/main.py", Access.WRITE).allowed is True
        assert judge.judge("/srv/other/secret", Access.READ).allowed is False
    assert judge.exposure("/srv/app/data") is data  # the rule's own path
    assert judge.exposure("/srv") is None  # above every rule
    monkeypatch.setattr(judge_module, "_MEMO", 4)  # a full memory is emptied, not trusted
    for number in range(10):
        assert judge.exposure(f"/srv/app/data/f{number}") is data
        assert judge.exposure(f"/srv/else/f{number}") is None
    assert judge.exposure("/srv/app/main.py") is project
