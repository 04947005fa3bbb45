"""Learned rules written back: where they go, what is kept, and what happens on disk."""

from __future__ import annotations

import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysandboxes._policy import writer
from pysandboxes._policy.lines import strip_comment
from pysandboxes._policy.model import Policy
from pysandboxes._policy.pyproject import pyproject_rule_lines
from pysandboxes._policy.registry import CATEGORIES
from pysandboxes._policy.template import SAFE_MODULES, TEMPLATE
from pysandboxes._policy.writer import (
    BLOCKS,
    MARKERS,
    LearnedRule,
    insert_learned,
    insert_learned_pyproject,
    write_pyproject,
    write_rule_file,
)

NOW = datetime(2025, 3, 4, 5, 6)
HEADER = "# Add rules (2025/03/04 at 05:06)"
ONE_OF_EACH = [
    LearnedRule("envs", "env=HOME=${HOME}", "learned: read by app/main.py:3"),
    LearnedRule("files", "expose-ro=./data/config.toml", "learned: read by app/db.py:12"),
    LearnedRule("socket", "net=ALLOW|tcp|localhost|8000|OUT"),
    LearnedRule("import", "python-import=ctypes", group="⚠ Dangerous!"),
    LearnedRule("api", "python-api=ALLOW:threads", group="⚠ threads"),
    LearnedRule("eval", "eval-syntax=arith"),
    LearnedRule("remote_result", "remote-result-mode=objects", "learned: app.Point returned"),
]


def active(line: str) -> str:
    """What a line grants: the parser's comment rule, and no spaces around the key's '='."""
    key, equal, value = strip_comment(line).partition("=")
    if equal and re.fullmatch(r"[A-Za-z0-9_.:-]+", key.strip()):
        return f"{key.strip()}={value.strip()}"
    return strip_comment(line)


def split(text: str) -> list[str]:
    return re.split(r"\r\n|\r|\n", text)


def is_subsequence(small: list[str], big: list[str]) -> bool:
    rest = iter(big)
    return all(any(line == other for other in rest) for line in small)


def added_lines(old: str, new: str) -> list[str]:
    """The lines of ``new`` that are not in ``old``, after checking ``old`` is kept in order."""
    before, after = split(old), split(new)
    assert is_subsequence(before, after)
    extra = Counter(after) - Counter(before)
    assert not Counter(before) - Counter(after)
    return sorted(extra.elements())


def block_of(text: str, block: str) -> list[str]:
    lines = split(text)
    opening, closing = MARKERS[block]
    return lines[lines.index(opening) + 1 : lines.index(closing)]


# -- insert_learned -----------------------------------------------------------------------


def test_each_rule_goes_before_the_closing_marker_of_its_block() -> None:
    out = insert_learned(TEMPLATE, ONE_OF_EACH, now=NOW)
    for rule in ONE_OF_EACH:
        body = block_of(out, rule.block)
        assert body[0] == HEADER
        assert any(line.startswith(rule.line) for line in body)
    assert block_of(out, "files") == [
        HEADER,
        "expose-ro=./data/config.toml  # learned: read by app/db.py:12",
    ]
    assert block_of(out, "import") == [HEADER, "# ⚠ Dangerous!", "python-import=ctypes"]


def test_only_rules_and_comments_are_added() -> None:
    out = insert_learned(TEMPLATE, ONE_OF_EACH, now=NOW)
    added = added_lines(TEMPLATE, out)
    rules = [active(line) for line in added if active(line)]
    assert sorted(rules) == sorted(rule.line for rule in ONE_OF_EACH)
    assert all(line.startswith("# ") for line in added if not active(line))
    assert added.count(HEADER) == len(BLOCKS)


def test_groups_get_one_header_each_in_order_of_appearance() -> None:
    rules = [
        LearnedRule("import", "python-import=ctypes", group="⚠ Dangerous!"),
        LearnedRule("import", "python-import=json", group="Standard Python"),
        LearnedRule("import", "python-import=subprocess", group="⚠ Dangerous!"),
        LearnedRule("import", "python-import=requests"),
    ]
    out = insert_learned(TEMPLATE, rules, now=NOW)
    assert block_of(out, "import") == [
        HEADER,
        "# ⚠ Dangerous!",
        "python-import=ctypes",
        "python-import=subprocess",
        "# Standard Python",
        "python-import=json",
        "python-import=requests",
    ]


def test_a_rule_already_present_is_dropped_whatever_its_spacing_or_comment() -> None:
    text = "expose-ro = ./data  # mine\nenv=A=1\n# net=ALLOW|tcp|*|443|OUT\n"
    rules = [
        LearnedRule("files", "expose-ro=./data"),
        LearnedRule("envs", "env = A=1", "again"),
        LearnedRule("socket", "net=ALLOW|tcp|*|443|OUT"),
        LearnedRule("socket", "net=ALLOW|tcp|*|443|OUT"),
    ]
    out = insert_learned(text, rules, now=NOW)
    # The commented net= line grants nothing, so the rule is new; its twin is dropped.
    assert added_lines(text, out) == sorted(["", HEADER, "net=ALLOW|tcp|*|443|OUT"])


def test_nothing_new_returns_the_text_unchanged() -> None:
    once = insert_learned(TEMPLATE, ONE_OF_EACH, now=NOW)
    assert insert_learned(once, ONE_OF_EACH, now=datetime(2030, 1, 1)) == once
    assert insert_learned(TEMPLATE, [], now=NOW) == TEMPLATE


def test_relearning_keeps_existing_group_headers() -> None:
    first = [LearnedRule("import", "python-import=ctypes", group="⚠ Dangerous!")]
    second = [LearnedRule("import", "python-import=pickle", group="⚠ Dangerous!")]
    out = insert_learned(insert_learned(TEMPLATE, first, now=NOW), second, now=NOW)
    body = block_of(out, "import")
    assert body.count("# ⚠ Dangerous!") == 2
    assert body.index("python-import=ctypes") < body.index("python-import=pickle")
    assert body[-2:] == ["# ⚠ Dangerous!", "python-import=pickle"]


def test_crlf_and_missing_final_newline_are_kept() -> None:
    text = "# mine\r\n# <learning_guard_files>\r\n# </learning_guard_files>\r\nenv=A=1"
    out = insert_learned(text, ONE_OF_EACH[:2], now=NOW)
    assert "\r\n" in out
    assert not re.search(r"(?<!\r)\n", out)
    assert not out.endswith("\n")
    assert out.startswith("# mine\r\n# <learning_guard_files>\r\n" + HEADER + "\r\n")
    assert out.splitlines()[4] == "# </learning_guard_files>"
    assert out.endswith(
        "env=A=1\r\n\r\n" + HEADER + "\r\nenv=HOME=${HOME}  # learned: read by app/main.py:3"
    )
    added_lines(text, out)


def test_a_hand_written_file_gets_the_rules_appended_in_block_order() -> None:
    text = "expose-ro=.\n# my own rules\n"
    out = insert_learned(text, list(reversed(ONE_OF_EACH)), now=NOW)
    assert out.startswith(text + "\n" + HEADER + "\n")
    assert out.endswith("\n")
    tail = split(out)[4:-1]
    assert [line.split("  #")[0] for line in tail if not line.startswith("#")] == [
        rule.line for rule in ONE_OF_EACH
    ]
    assert out.count("# Add rules") == 1


def test_a_block_without_its_marker_is_appended_at_the_end() -> None:
    text = "# <learning_guard_files>\n# </learning_guard_files>\n# tail"
    out = insert_learned(text, ONE_OF_EACH[:2], now=NOW)
    assert out == (
        "# <learning_guard_files>\n"
        f"{HEADER}\n"
        "expose-ro=./data/config.toml  # learned: read by app/db.py:12\n"
        "# </learning_guard_files>\n"
        "# tail\n"
        "\n"
        f"{HEADER}\n"
        "env=HOME=${HOME}  # learned: read by app/main.py:3"
    )


def test_a_note_that_would_change_the_rule_goes_above_it() -> None:
    rules = [
        LearnedRule("envs", 'env=Q="a # b"', "quoted"),
        LearnedRule("envs", "env=R='unbalanced", "odd"),
    ]
    out = insert_learned(TEMPLATE, rules, now=NOW)
    assert block_of(out, "envs") == [
        HEADER,
        "# quoted",
        'env=Q="a # b"',
        "# odd",
        "env=R='unbalanced",
    ]


def test_a_line_break_cannot_smuggle_a_rule() -> None:
    with pytest.raises(ValueError, match="single rule line"):
        insert_learned(TEMPLATE, [LearnedRule("files", "expose-ro=.\nexpose-rw=/")], now=NOW)
    with pytest.raises(ValueError, match="single rule line"):
        insert_learned(TEMPLATE, [LearnedRule("files", "# only a comment")], now=NOW)
    with pytest.raises(ValueError, match="unknown learning block"):
        insert_learned(TEMPLATE, [LearnedRule("nope", "env=A=1")], now=NOW)
    sneaky = LearnedRule("files", "expose-ro=./x", note="x\nexpose-rw=/", group="g\rexpose-rw=/")
    out = insert_learned(TEMPLATE, [sneaky], now=NOW)
    assert "expose-rw=/" not in [line.split("#")[0].strip() for line in split(out)]


# -- the template -------------------------------------------------------------------------


def test_the_template_grants_the_layers_and_the_pure_standard_library_only() -> None:
    rules = [line for line in TEMPLATE.splitlines() if line.strip() and not line.startswith("#")]
    imports = [line for line in rules if line.startswith("python-import=")]
    assert [line for line in rules if line not in imports] == [
        "py-sandbox=true",
        "os-sandbox=${OS_SANDBOX:-landlock}",
    ]
    names = [name.strip() for line in imports for name in line.split("=", 1)[1].split(",")]
    assert names == list(SAFE_MODULES)
    assert all(len(line) <= 88 for line in imports)
    # What reaches files, the network, processes or C code by itself stays ungranted.
    for reaching in ("os", "io", "shutil", "socket", "urllib", "subprocess", "ctypes", "pickle"):
        assert reaching not in names


def test_the_template_has_every_block_in_order() -> None:
    lines = list[str](TEMPLATE.splitlines())
    positions = [lines.index(marker) for block in BLOCKS for marker in MARKERS[block]]
    assert positions == sorted(positions)
    assert all(b - a == 1 for a, b in zip(positions[::2], positions[1::2], strict=True))


def test_the_template_explains_the_rules() -> None:
    assert "DENY BY DEFAULT" in TEMPLATE.split("\n\n")[0]
    for category in CATEGORIES:
        assert re.search(rf"^#\s+{category}\s", TEMPLATE, re.MULTILINE), category
    for provider in ("landlock", "unshare", "bwrap", "subprocess", "none"):
        assert re.search(rf"^#\s+{provider}\s", TEMPLATE, re.MULTILINE), provider
    assert "\n# learn=false\n" in TEMPLATE
    assert len(TEMPLATE.splitlines()) < 200


def granted(policy: Policy) -> set[str]:
    """The rule texts a parsed policy holds, from every family learning writes."""
    families = (policy.expose, policy.env, policy.net, policy.imports, policy.api, policy.eval)
    texts = {rule.origin.text for family in families for rule in family}
    mode = policy.remote_result_mode
    return texts | ({mode.origin.text} if mode else set())


def test_the_template_parses_to_deny_all_and_takes_learned_rules(
    parse: Callable[..., Policy], tmp_path: Path
) -> None:
    empty = parse(TEMPLATE)
    assert {text for text in granted(empty) if not text.startswith("python-import=")} == set()
    assert empty.py_sandbox is not None
    assert empty.py_sandbox.value is True
    assert empty.os_sandbox is not None
    assert empty.os_sandbox.value == "landlock"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "config.toml").touch()
    learned = parse(insert_learned(TEMPLATE, ONE_OF_EACH, now=NOW))
    assert granted(learned) == {rule.line for rule in ONE_OF_EACH} | granted(empty)


# -- write_rule_file ----------------------------------------------------------------------


@pytest.fixture
def umask_077() -> Iterator[None]:
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_077")
def test_a_new_file_is_the_template_with_the_rules_and_mode_0644(tmp_path: Path) -> None:
    target = tmp_path / ".py-sandboxes"
    assert write_rule_file(target, ONE_OF_EACH, now=NOW) is None
    assert target.read_text() == insert_learned(TEMPLATE, ONE_OF_EACH, now=NOW)
    assert mode(target) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == [".py-sandboxes"]


def test_an_existing_file_keeps_its_mode_and_gets_numbered_backups(tmp_path: Path) -> None:
    target = tmp_path / ".py-sandboxes"
    original = "# mine\r\nexpose-ro=.\r\n"
    target.write_bytes(original.encode())
    target.chmod(0o600)
    (tmp_path / ".py-sandboxes.old_1").write_text("older, keep me")

    first = write_rule_file(target, ONE_OF_EACH[:1], now=NOW)
    assert first is not None
    assert first == tmp_path / ".py-sandboxes.old"
    assert first.read_bytes() == original.encode()
    assert mode(target) == 0o600
    assert mode(first) == 0o600
    after_first = target.read_bytes()

    second = write_rule_file(target, ONE_OF_EACH[:2], now=NOW)
    assert second is not None
    assert second == tmp_path / ".py-sandboxes.old_2"  # .old_1 was taken: never overwritten
    assert second.read_bytes() == after_first
    assert (tmp_path / ".py-sandboxes.old_1").read_text() == "older, keep me"
    assert first.read_bytes() == original.encode()
    assert target.read_bytes().startswith(original.encode())


def test_nothing_new_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / ".py-sandboxes"
    target.write_text("env=HOME=${HOME}\n")
    before = target.stat()
    assert write_rule_file(target, ONE_OF_EACH[:1], now=NOW) is None
    assert target.stat().st_mtime_ns == before.st_mtime_ns
    assert [p.name for p in tmp_path.iterdir()] == [".py-sandboxes"]


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_a_failed_write_leaves_the_file_whole_and_no_stray_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    target = tmp_path / ".py-sandboxes"
    target.write_text("expose-ro=.\n")

    def boom(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer.os, failing, boom)
    with pytest.raises(OSError, match="No space left"):
        write_rule_file(target, ONE_OF_EACH, now=NOW)
    monkeypatch.undo()
    assert target.read_text() == "expose-ro=.\n"
    assert [p.name for p in tmp_path.iterdir()] == [".py-sandboxes"]


def test_a_new_file_that_cannot_be_written_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(writer.os, "replace", boom)
    with pytest.raises(OSError, match="Input/output"):
        write_rule_file(tmp_path / ".py-sandboxes", ONE_OF_EACH, now=NOW)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_bad_targets_raise_oserror(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        write_rule_file(tmp_path, ONE_OF_EACH, now=NOW)
    with pytest.raises(FileNotFoundError):
        write_rule_file(tmp_path / "missing" / ".py-sandboxes", ONE_OF_EACH, now=NOW)
    assert list(tmp_path.iterdir()) == []


def test_a_symlink_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    target = tmp_path / ".py-sandboxes"
    target.symlink_to(victim)
    backup = write_rule_file(target, ONE_OF_EACH[:1], now=NOW)
    assert victim.read_text() == "keep\n"
    assert not target.is_symlink()
    assert backup is not None
    assert backup.read_text() == "keep\n"


# -- pyproject.toml -----------------------------------------------------------------------

PYPROJECT = """\
[project]
name = "app"  # the name

[tool.py-sandboxes]
expose-ro = ["./data", "~/.config/app"]
env = [
    "HOME=${HOME}",  # for the cache
]
net = ["ALLOW|tcp|127.0.0.1|8000|OUT"]
os-sandbox = "landlock"
py-sandbox = true
learn = false
include = ["../shared.py-sandboxes"]
"eval-syntax:calc" = ["arith"]

[tool.py-sandboxes.bwrap]
hostname = "box"

[tool.ruff]
line-length = 100   # wide
"""


def test_pyproject_rules_come_with_their_lines() -> None:
    assert pyproject_rule_lines(PYPROJECT) == [
        (5, "expose-ro=./data"),
        (5, "expose-ro=~/.config/app"),
        (7, "env=HOME=${HOME}"),
        (9, "net=ALLOW|tcp|127.0.0.1|8000|OUT"),
        (10, "os-sandbox=landlock"),
        (11, "py-sandbox=true"),
        (12, "learn=false"),
        (13, 'include "../shared.py-sandboxes"'),
        (14, "eval-syntax:calc=arith"),
        (17, "bwrap.hostname=box"),
    ]


def test_pyproject_lines_survive_tricky_toml() -> None:
    text = (
        'a = """x\n[tool.py-sandboxes]\n"""\n'  # a header inside a string
        "b = '''q''''\n"
        '[tool."py-sandboxes"]\n'
        "# env = ['commented']\n"
        'env = [ # why\n  "A=]", # x\n\n  \'B=2\',\n  "C=\\"3\\""]\n'
        'bwrap = { hostname = "h", share-net = true }\n'
    )
    assert pyproject_rule_lines(text) == [
        (8, "env=A=]"),
        (10, "env=B=2"),
        (11, 'env=C="3"'),
        (12, "bwrap.hostname=h"),
        (12, "bwrap.share-net=true"),
    ]


def test_no_table_means_no_rules() -> None:
    assert pyproject_rule_lines("") is None
    assert pyproject_rule_lines('[project]\nname = "x"\n[tool.ruff]\nx = 1\n') is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[project]\nname = [\n", r"^line \d+: not valid TOML"),
        ("[a]\nx = 1\n[a]\ny = 2\n", r"^line \d: not valid TOML: Key \"a\" already exists"),
        ("[tool.py-sandboxes]\n\nport = 8765\n", r"^line 3: port: .*number.*quotes"),
        ('[tool.py-sandboxes]\nenv = [\n  "A=1",\n  2,\n]\n', r"^line 4: env: .*number"),
        ('[tool.py-sandboxes]\nenv = [["A=1"]]\n', r"^line 2: env: .*array"),
        ("[tool.py-sandboxes]\nx = 1979-05-27\n", r"^line 2: x: .*date"),
        ('[tool.py-sandboxes.bwrap.deep]\nx = "1"\n', r"^line 1: bwrap.deep: .*table"),
        ('[tool.py-sandboxes]\nenv = """A=1\nB=2"""\n', r"^line 2: env: a rule is one line"),
        ('[tool.py-sandboxes]\n"a=b" = "c"\n', r"^line 2: 'a=b' is not a rule key"),
        ("[tool]\npy-sandboxes = 1\n", r"^line 2: tool.py-sandboxes must be a table"),
        ("[tool.py-sandboxes]\ninclude = ['a\"b']\n", r"^line 2: include"),
    ],
)
def test_bad_pyproject_values_name_their_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pyproject_rule_lines(text)


def test_learned_rules_go_into_the_arrays_with_their_notes() -> None:
    rules = [
        LearnedRule("files", "expose-ro=./data"),  # already there
        LearnedRule("files", "expose-ro=./cache/x", "learned: read by a.py:1"),
        LearnedRule("envs", "env=LANG=${LANG}", group="locale"),
        LearnedRule("import", "python-import=json", "learned: import in a.py:2"),
        LearnedRule("remote_result", "remote-result-mode=objects", "learned: a.Point"),
    ]
    out = insert_learned_pyproject(PYPROJECT, rules, now=NOW)
    # Outside the arrays that changed, every byte is kept.
    assert out.startswith(PYPROJECT[: PYPROJECT.index("expose-ro = [")])
    assert (
        PYPROJECT[PYPROJECT.index("net = [") : PYPROJECT.index("\n\n[tool.py-sandboxes.bwrap]")]
        in out
    )
    assert out.endswith(PYPROJECT[PYPROJECT.index("\n[tool.py-sandboxes.bwrap]") :])
    assert (
        "\n".join(
            [
                "expose-ro = [",
                '    "./data",',
                '    "~/.config/app",',
                "    # Add rules (2025/03/04 at 05:06)",
                '    "./cache/x", # learned: read by a.py:1',
                "]",
                "env = [",
                '    "HOME=${HOME}",  # for the cache',
                "    # Add rules (2025/03/04 at 05:06)",
                "    # locale",
                '    "LANG=${LANG}",',
                "]",
                'net = ["ALLOW|tcp|127.0.0.1|8000|OUT"]',
            ]
        )
        in out
    )
    assert 'python-import = [\n    # Add rules (2025/03/04 at 05:06)\n    "json", # learned' in out
    assert 'remote-result-mode = "objects" # learned: a.Point\n' in out
    assert out.endswith("[tool.ruff]\nline-length = 100   # wide\n")
    rules_read = [rule for _, rule in pyproject_rule_lines(out) or []]
    assert {"expose-ro=./cache/x", "env=LANG=${LANG}", "python-import=json"} <= set(rules_read)
    assert insert_learned_pyproject(out, rules, now=NOW) == out


def test_the_table_is_created_at_the_end_when_missing() -> None:
    text = '[project]\nname = "app"  # keep\n\n[tool.ruff]\nx = 1'
    out = insert_learned_pyproject(text, ONE_OF_EACH[:2], now=NOW)
    assert out.startswith(text + "\n\n[tool.py-sandboxes]\n")
    assert pyproject_rule_lines(out) == [
        (10, "env=HOME=${HOME}"),
        (14, "expose-ro=./data/config.toml"),
    ]
    assert insert_learned_pyproject("", ONE_OF_EACH[:1], now=NOW).startswith(
        "[tool.py-sandboxes]\nenv = [\n"
    )


def test_rules_written_to_pyproject_parse_back(
    parse: Callable[..., Policy], tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "config.toml").touch()
    out = insert_learned_pyproject('[project]\nname = "app"\n', ONE_OF_EACH, now=NOW)
    assert granted(parse(out, name="pyproject.toml")) == {rule.line for rule in ONE_OF_EACH}


def test_pyproject_crlf_is_kept() -> None:
    text = '[tool.py-sandboxes]\r\nenv = ["A=1"]\r\n'
    out = insert_learned_pyproject(text, ONE_OF_EACH[:1], now=NOW)
    assert not re.search(r"(?<!\r)\n", out)
    assert pyproject_rule_lines(out) is not None


def test_write_pyproject_keeps_a_backup_and_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "pyproject.toml"
    target.write_text(PYPROJECT)
    target.chmod(0o640)
    backup = write_pyproject(target, ONE_OF_EACH[:2], now=NOW)
    assert backup is not None
    assert backup == tmp_path / "pyproject.toml.old"
    assert backup.read_text() == PYPROJECT
    assert mode(target) == 0o640
    assert "env=HOME=${HOME}" in [
        rule for _, rule in pyproject_rule_lines(target.read_text()) or []
    ]
    assert write_pyproject(target, ONE_OF_EACH[:2], now=NOW) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml", "pyproject.toml.old"]


# -- properties ---------------------------------------------------------------------------

_TEXT = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="#"),
    max_size=12,
)
_KEYS = st.sampled_from(["env", "expose-ro", "net", "python-import", "a-b", "x"])
_VALUES = st.sampled_from(["1", "./data", "A=${A}", "ALLOW|tcp|*|443|OUT", "x y", "'q'", '"#"'])
_SPACE = st.sampled_from(["", " ", "  "])


@st.composite
def rule_texts(draw: st.DrawFn) -> str:
    return draw(_KEYS) + draw(_SPACE) + "=" + draw(_SPACE) + draw(_VALUES)


@st.composite
def file_lines(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["blank", "comment", "rule", "marker", "text"]))
    if kind == "blank":
        return draw(st.sampled_from(["", " ", "\t"]))
    if kind == "comment":
        return "#" + draw(_TEXT)
    if kind == "rule":
        comment = draw(st.sampled_from(["", "  # c", "#x"]))
        return draw(_SPACE) + draw(rule_texts()) + comment
    if kind == "marker":
        return MARKERS[draw(st.sampled_from(BLOCKS))][draw(st.integers(0, 1))]
    return draw(_TEXT)


_RULES = st.lists(
    st.builds(
        LearnedRule,
        block=st.sampled_from(BLOCKS),
        line=rule_texts(),
        note=st.none() | _TEXT,
        group=st.none() | st.sampled_from(["⚠ Dangerous!", "Standard Python"]),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(file_lines(), max_size=20),
    newline=st.sampled_from(["\n", "\r\n"]),
    final=st.booleans(),
    rules=_RULES,
)
def test_insertion_keeps_every_line_and_adds_exactly_the_new_rules(
    lines: list[str], newline: str, final: bool, rules: list[LearnedRule]
) -> None:
    text = newline.join(lines) + (newline if final and lines else "")
    out = insert_learned(text, rules, now=NOW)

    present = {active(line) for line in lines}
    expected: list[str] = []
    for rule in rules:
        if active(rule.line) not in present and active(rule.line) not in expected:
            expected.append(active(rule.line))
    if not expected:
        assert out == text
        return
    added = added_lines(text, out)
    assert sorted(active(line) for line in added if active(line)) == sorted(expected)
    assert all(line.startswith("#") or not line for line in added if not active(line))
    after = split(out)
    placed: set[str] = set()
    for rule in rules:
        if active(rule.line) not in expected or active(rule.line) in placed:
            continue  # already in the file, or a twin of an earlier rule
        placed.add(active(rule.line))
        at = next(i for i, line in enumerate(after) if active(line) == active(rule.line))
        closing = [i for i, line in enumerate(after) if line.strip() == MARKERS[rule.block][1]]
        if closing:  # just before the block's first closing marker, among added lines only
            same_block = {active(r.line) for r in rules if r.block == rule.block}
            between = after[at + 1 : closing[0]]
            assert all(line.startswith("#") or active(line) in same_block for line in between)
        else:
            assert at >= len(split(text)) - 1
    if newline in text:
        assert "\r" not in out if newline == "\n" else not re.search(r"(?<!\r)\n", out)
    assert out.endswith(("\n", "\r")) == (text.endswith(newline) or not text)
    assert insert_learned(out, rules, now=NOW) == out


# -- round trip: parse → write learned rules → parse ---------------------------------------

EDITED = """\
# my project's rules, reviewed by hand
expose-ro=./src   # the code
env=LANG=C.UTF-8
# <learning_guard_files>
# </learning_guard_files>
net=ALLOW|tcp|127.0.0.1|8000|OUT
"""


def test_round_trip_keeps_every_line_and_adds_exactly_the_new_rules(
    parse: Callable[..., Policy], tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "config.toml").touch()
    before = parse(EDITED)
    path = tmp_path / ".py-sandboxes"
    backup = write_rule_file(path, ONE_OF_EACH, now=NOW)
    assert backup is not None
    assert backup.read_text() == EDITED
    after = parse(path.read_text())
    new_lines = path.read_text().splitlines()
    old_lines = EDITED.splitlines()
    it = iter(new_lines)
    assert all(line in it for line in old_lines)  # every original line, in order
    assert granted(after) == granted(before) | {rule.line for rule in ONE_OF_EACH}


def test_round_trip_in_pyproject(parse: Callable[..., Policy], tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "config.toml").touch()
    original = (
        '[project]\nname = "app"  # keep me\n\n[tool.py-sandboxes]\n'
        '# reviewed\nexpose-ro = ["./src"]  # the code\n'
    )
    path = tmp_path / "pyproject.toml"
    path.write_text(original)
    before = parse(original, name="pyproject.toml")
    write_pyproject(path, ONE_OF_EACH, now=NOW)
    text = path.read_text()
    assert "# keep me" in text
    assert "# reviewed" in text
    assert "# the code" in text
    after = parse(text, name="pyproject.toml")
    assert granted(after) == granted(before) | {rule.line for rule in ONE_OF_EACH}
