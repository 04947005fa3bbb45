"""docs/configuration.md tells the truth: every rule-file example parses as the page says.

Fences with the info string ``py-sandboxes <kind>`` are written to ``.py-sandboxes`` (with
``toml py-sandboxes <kind>``: to ``pyproject.toml``) in a directory holding a small fixed
tree, and parsed with a fixed launching environment and a fake resolver (nothing touches the
network). Kinds:

- ``valid``: parses, with no warning;
- ``invalid``: refused; the ```text fence right after it lists every message, in order;
- ``warns``: parses; the ```text fence after it lists every warning;
- ``env``: parses; the ```text fence lists the sandbox environment as ``NAME=value`` lines;
- ``env-invalid``: parses, but building the environment is refused with the listed messages.

Tokens ``--key=value`` after the kind are command-line rules. In expected messages,
``/home/me/project`` stands for the directory of the rule file.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest

from pysandboxes import ConfigSyntaxError
from pysandboxes._policy import evalkeys, parser
from pysandboxes._policy.envres import resolve_env
from pysandboxes._policy.model import Policy
from pysandboxes._policy.parser import parse_policy

PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
HEADING = re.compile(r"^(#{2,3}) (.+)$", re.M)
PROJECT = "/home/me/project"
KINDS = ("valid", "invalid", "warns", "env", "env-invalid")
EXPECTING = ("invalid", "warns", "env", "env-invalid")
VALID_KINDS = ("valid", "warns", "env")
INVALID_KINDS = ("invalid", "env-invalid")

ENV = {
    "HOME": "/home/me",
    "USER": "me",
    "LANG": "C.UTF-8",
    "OPENAI_API_KEY": "sk-test",
    "ANTHROPIC_API_KEY": "sk-ant-test",
}
HOSTS = {"localhost": ["127.0.0.1", "::1"], "api.example.test": ["192.0.2.10"]}


def fake_resolver(host: str) -> list[str]:
    """The test names only, failing for any other as the system resolver would."""
    try:
        return HOSTS[host]
    except KeyError:
        # EAI_NONAME as glibc numbers it, so the message is the same on every host.
        raise socket.gaierror(-2, "Name or service not known") from None


@dataclass(frozen=True)
class Example:
    line: int
    target: str  # ".py-sandboxes" or "pyproject.toml"
    kind: str
    args: tuple[str, ...]
    text: str
    expected: tuple[str, ...] | None
    problem: str | None = None


def examples() -> list[Example]:
    """Every rule-file example of the page, in order."""
    text = PAGE.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(text))
    found: list[Example] = []
    for index, match in enumerate(fences):
        tokens = match.group(1).split()
        if tokens[:1] == ["toml"]:
            target, tokens = "pyproject.toml", tokens[1:]
        else:
            target = ".py-sandboxes"
        if tokens[:1] != ["py-sandboxes"]:
            continue
        line = text.count("\n", 0, match.start()) + 1
        kind = tokens[1] if len(tokens) > 1 else ""
        args = tuple(t[2:] for t in tokens[2:] if t.startswith("--"))
        problem = None
        if kind not in KINDS:
            problem = f"unknown kind {kind!r}"
        elif len(args) != len(tokens) - 2:
            problem = f"info string tokens must be --key=value: {tokens[2:]}"
        expected = None
        if kind in EXPECTING:
            follower = fences[index + 1] if index + 1 < len(fences) else None
            gap = text[match.end() : follower.start()] if follower else "missing"
            if follower is None or follower.group(1).strip() != "text" or gap.strip():
                problem = "not immediately followed by a ```text fence of expected lines"
            else:
                expected = tuple(ln for ln in follower.group(2).splitlines() if ln.strip())
        body = match.group(2).removesuffix("\n")
        found.append(Example(line, target, kind, args, body, expected, problem))
    return found


EXAMPLES = examples()


def make_tree(root: Path) -> None:
    for directory in ("data", "data/cache", "src", "logs", "output"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    (root / "config.toml").write_text('name = "demo"\n')
    (root / "app.py").write_text("print('hello')\n")
    (root / "shared.py-sandboxes").write_text("python-import=json\n")


def lines_of(expected: tuple[str, ...] | None, root: str) -> list[str]:
    assert expected is not None
    return [line.replace(PROJECT, root) for line in expected]


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"configuration.md:{e.line}" for e in EXAMPLES])
def test_example(example: Example, tmp_path: Path) -> None:
    assert example.problem is None, example.problem
    make_tree(tmp_path)
    root = os.path.realpath(tmp_path)
    rules = tmp_path / example.target
    rules.write_text(example.text + "\n", encoding="utf-8")

    def parse() -> Policy:
        return parse_policy(
            str(rules),
            extra_rules=list(example.args),
            cwd=str(tmp_path),
            env=ENV,
            platform="linux",
            resolve_host=fake_resolver,
        )

    if example.kind == "invalid":
        with pytest.raises(ConfigSyntaxError) as caught:
            parse()
        assert [str(e) for e in caught.value.errors] == lines_of(example.expected, root)
        for line in lines_of(example.expected, root):
            assert line in str(caught.value)
        return
    policy = parse()
    if example.kind == "warns":
        assert list(policy.warnings) == lines_of(example.expected, root)
        return
    assert policy.warnings == (), "a valid example must not warn: mark it `warns`"
    if example.kind == "env":
        expected = dict(line.split("=", 1) for line in lines_of(example.expected, root))
        assert resolve_env(policy, ENV) == expected
    elif example.kind == "env-invalid":
        with pytest.raises(ConfigSyntaxError) as caught:
            resolve_env(policy, ENV)
        assert [str(e) for e in caught.value.errors] == lines_of(example.expected, root)


# --- coverage of the keys -------------------------------------------------------------------


def every_key() -> list[str]:
    return [
        *parser.KNOWN_KEYS,
        *(f"eval-{key}" for key in (*evalkeys.LIST_KEYS, *evalkeys.SCALAR_KEYS)),
    ]


def _span_names(key: str, span: str) -> bool:
    """Whether a code span such as `expose-ro=` or `include "path"` names ``key``."""
    return span == key or (span.startswith(key) and span[len(key)] in "= :")


def sections_of(key: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the ## / ### sections whose heading names ``key``."""
    text = PAGE.read_text(encoding="utf-8")
    headings = list(HEADING.finditer(text))
    found: list[tuple[int, int]] = []
    for index, heading in enumerate(headings):
        spans = re.findall(r"`([^`]+)`", heading.group(2))
        if not any(_span_names(key, span) for span in spans):
            continue
        level = len(heading.group(1))
        end = len(text)
        for later in headings[index + 1 :]:
            if len(later.group(1)) <= level:
                end = later.start()
                break
        found.append((heading.start(), end))
    return found


def _example_names(example: Example, key: str) -> bool:
    lines = [*example.text.splitlines(), *example.args]
    if example.target == "pyproject.toml":
        pattern = rf'^"?{re.escape(key)}(:[\w-]+)?"?\s*='
    elif key.startswith("include"):
        pattern = rf"^{re.escape(key)}[ =]"
    else:
        pattern = rf"^{re.escape(key)}(:[\w-]*)?="
    return any(re.match(pattern, line.strip()) for line in lines)


@pytest.mark.parametrize("key", every_key())
def test_every_key_has_a_section_with_valid_and_invalid_examples(key: str) -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert f"`{key}" in text, f"{key} does not appear in the page"
    sections = sections_of(key)
    assert sections, f"no ## or ### heading names `{key}`"
    offsets = {e.line: e for e in EXAMPLES}
    inside: list[Example] = []
    for start, end in sections:
        first = text.count("\n", 0, start) + 1
        last = text.count("\n", 0, end) + 1
        inside.extend(e for line, e in offsets.items() if first <= line < last)
    naming = [e for e in inside if _example_names(e, key)]
    assert any(e.kind in VALID_KINDS for e in naming), f"no valid example of {key}"
    assert any(e.kind in INVALID_KINDS for e in naming), f"no invalid example of {key}"


def test_every_provider_option_is_documented() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for provider, options in parser.PROVIDER_OPTIONS.items():
        assert f"`{provider}`" in text
        for option in options:
            assert f"`{provider}.{option}=`" in text


def test_the_page_has_examples_of_every_kind() -> None:
    kinds = {e.kind for e in EXAMPLES}
    assert kinds == set(KINDS)
    assert {e.target for e in EXAMPLES} == {".py-sandboxes", "pyproject.toml"}
