"""argv.split: python-sb's command line, split by CPython's rules. Pure: no process."""

from __future__ import annotations

import pytest

from python_sb.argv import Invocation, UsageError, split

CASES = [
    ([], Invocation()),
    (["app.py", "-c", "x"], Invocation(kind="script", target="app.py", args=("-c", "x"))),
    (["-m", "json.tool", "-h"], Invocation(kind="module", target="json.tool", args=("-h",))),
    (["-mjson.tool"], Invocation(kind="module", target="json.tool")),
    (["-cprint(1)", "a"], Invocation(kind="command", target="print(1)", args=("a",))),
    (["-c", "print(1)"], Invocation(kind="command", target="print(1)")),
    (["-Im", "mod"], Invocation(kind="module", target="mod", python_flags=("-I",))),
    (["-Bu", "app.py"], Invocation(kind="script", target="app.py", python_flags=("-B", "-u"))),
    (
        ["-Wdefault", "app.py"],
        Invocation(kind="script", target="app.py", python_flags=("-W", "default")),
    ),
    (
        ["-W", "error", "-X", "dev", "-"],
        Invocation(kind="stdin", target="-", python_flags=("-W", "error", "-X", "dev")),
    ),
    (["-OO", "-c", "1"], Invocation(kind="command", target="1", python_flags=("-O", "-O"))),
    (["-i"], Invocation(python_flags=("-i",))),
    (["--", "-weird.py", "x"], Invocation(kind="script", target="-weird.py", args=("x",))),
    (["-", "a", "b"], Invocation(kind="stdin", target="-", args=("a", "b"))),
    (
        ["--expose-ro=/data", "app.py"],
        Invocation(kind="script", target="app.py", rules=("expose-ro=/data",)),
    ),
    (
        ["--py-sandbox", "app.py"],
        Invocation(kind="script", target="app.py", rules=("py-sandbox=",)),
    ),
    (
        ["--pysandboxes-config", "r.cfg", "app.py"],
        Invocation(kind="script", target="app.py", config="r.cfg"),
    ),
    (
        ["--pysandboxes-config=r.cfg", "-c", "1"],
        Invocation(kind="command", target="1", config="r.cfg"),
    ),
    (["--learn", "app.py"], Invocation(kind="script", target="app.py", learn="")),
    (
        ["--learn=out.rules", "app.py"],
        Invocation(kind="script", target="app.py", learn="out.rules"),
    ),
    (
        ["--check-hash-based-pycs", "always", "-c", "1"],
        Invocation(kind="command", target="1", python_flags=("--check-hash-based-pycs=always",)),
    ),
    (
        ["app.py", "--expose-ro=/"],
        Invocation(kind="script", target="app.py", args=("--expose-ro=/",)),
    ),
    (["-c", "1", "--learn"], Invocation(kind="command", target="1", args=("--learn",))),
    (["--show-rules", "app.py"], Invocation(action="show-rules", kind="script", target="app.py")),
    (["-V"], Invocation(action="version")),
    (["--version"], Invocation(action="version")),
    (["-h"], Invocation(action="help")),
    (["--help"], Invocation(action="help")),
    (["-?"], Invocation(action="help")),
    (["--help-env"], Invocation(action="python-help", target="--help-env")),
]


@pytest.mark.parametrize(
    ("argv", "expected"), CASES, ids=[" ".join(c[0]) or "<none>" for c in CASES]
)
def test_split(argv: list[str], expected: Invocation) -> None:
    assert split(argv) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-c"], "Argument expected for the -c option"),
        (["-m"], "Argument expected for the -m option"),
        (["-W"], "Argument expected for the -W option"),
        (["-z"], "Unknown option: -z"),
        (["--pysandboxes-config"], "option --pysandboxes-config needs a value"),
        (["--=x"], "invalid option"),
    ],
)
def test_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("?", r"\?")):
        split(argv)
