"""``python-sb --check``: a rule file's likely mistakes, as warnings; no program runs.

One file per warning: each names its line, goes to stderr, and leaves the exit status 0;
a rule file that cannot be used exits 255 with every error. A clean file says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from runner import Runner


def _check(sb: Runner, project: Path, rules: str) -> tuple[int, str]:
    (project / "data" / "sub").mkdir(parents=True, exist_ok=True)
    (project / ".py-sandboxes").write_text(rules)
    result = sb("--check")
    return result.returncode, result.stderr


@pytest.mark.parametrize(
    ("rules", "warning"),
    [
        (
            "net=ALLOW|tcp|10.1.2.3|443|OUT\nnet=DENY|tcp|10.0.0.0/8|*|OUT\n",
            ".py-sandboxes(1): 'net=ALLOW|tcp|10.1.2.3|443|OUT' can never match: "
            "'net=DENY|tcp|10.0.0.0/8|*|OUT' (.py-sandboxes(2)) denies all of it",
        ),
        (
            "expose-ro=./data\nignore=/opt/nowhere/*.log\n",
            ".py-sandboxes(2): 'ignore=/opt/nowhere/*.log' can never match: no expose-* line",
        ),
        (
            "expose-ro=.\nexpose-ro=./data/sub\n",
            ".py-sandboxes(1): 'expose-ro=.' grants all that 'expose-ro=./data/sub' "
            "(.py-sandboxes(2)) grants, and more",
        ),
        (
            "net=ALLOW|tcp|10.0.0.0/8|443|OUT\nnet=ALLOW|tcp|10.1.2.3|443|OUT\n",
            ".py-sandboxes(1): 'net=ALLOW|tcp|10.0.0.0/8|443|OUT' grants all that "
            "'net=ALLOW|tcp|10.1.2.3|443|OUT' (.py-sandboxes(2)) grants, and more",
        ),
        (
            "python-import=json\npython-import=*\n",
            ".py-sandboxes(2): 'python-import=*' grants every module: 'python-import=json'",
        ),
        (
            "env=GITHUB_TOKEN=${GITHUB_TOKEN}\n",
            ".py-sandboxes(1): 'env=GITHUB_TOKEN=${GITHUB_TOKEN}' grants a secret, not "
            "commented out",
        ),
        (
            "expose-ro=./data/server.key\n",
            ".py-sandboxes(1): 'expose-ro=./data/server.key' grants a file of keys or "
            "credentials, not commented out",
        ),
        (
            "expose-rw=.\n",
            ".py-sandboxes(1): 'expose-rw=.' makes the rule file itself a write target",
        ),
        (
            "eval-syntax=arith\neval-magic=__subclasses__\n",
            ".py-sandboxes(2): '__subclasses__' in 'eval-magic=__subclasses__' is never allowed",
        ),
    ],
    ids=[
        "never-matches-net",
        "never-matches-ignore",
        "wider-exposure",
        "wider-net",
        "every-module",
        "secret-variable",
        "secret-file",
        "rw-over-rule-file",
        "eval-stricter",
    ],
)
def test_check_warns_with_the_line(sb: Runner, project: Path, rules: str, warning: str) -> None:
    (project / "data").mkdir(exist_ok=True)
    (project / "data" / "server.key").write_text("k")
    status, stderr = _check(sb, project, rules)
    assert status == 0, stderr
    assert warning in stderr


def test_a_clean_rule_file_gets_no_warning(sb: Runner, project: Path) -> None:
    status, stderr = _check(sb, project, "expose-ro=./data\npython-import=json\n")
    assert (status, stderr) == (0, "")


def test_a_secret_commented_out_is_not_a_warning(sb: Runner, project: Path) -> None:
    rules = "# env=GITHUB_TOKEN=${GITHUB_TOKEN}  # secret, not granted\npython-import=json\n"
    status, stderr = _check(sb, project, rules)
    assert (status, stderr) == (0, "")


def test_check_reports_unknown_and_duplicated_keys_as_the_parser_does(
    sb: Runner, project: Path
) -> None:
    status, stderr = _check(sb, project, "expose-roo=./data\neval-timeout=1s\neval-timeout=2s\n")
    assert status == 255
    assert ".py-sandboxes(1): unknown key 'expose-roo'" in stderr
    assert ".py-sandboxes(3): 'eval-timeout=2s' is set twice in this profile" in stderr


def test_check_runs_no_program(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("python-import=json\n")
    (project / "app.py").write_text("open('ran', 'w').close()\n")
    result = sb("--check", "app.py")
    assert result.returncode == 0, result.stderr
    assert not (project / "ran").exists()


def test_check_without_a_rule_file_says_there_is_none(sb: Runner, project: Path) -> None:
    result = sb("--check")
    assert result.returncode == 0
    assert result.stdout.startswith("python-sb: no rule file here to check")
