"""Whatever the text, the parser returns a policy or raises ConfigSyntaxError, quickly."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import fake_resolver
from pysandboxes import ConfigSyntaxError
from pysandboxes._policy.parser import KNOWN_KEYS, parse_policy

KEYS = [*KNOWN_KEYS, "eval-syntax", "eval-timeout:p", "eval-call", "bwrap.hostname", "x.y", ""]
FRAGMENTS = ["*", "|", ",", "${", "}", ":-", "DENY:", "ALLOW:", '"', "#", "..", "/", "~", "="]
value_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=8).map(
    "".join
)
rule_line = st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS), value_text)
any_line = st.one_of(rule_line, st.text(max_size=40), value_text.map(lambda v: f'include "{v}"'))

FUZZ = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])


def check(tmp_path: Path, text: str, extra: list[str]) -> None:
    rules = tmp_path / ".py-sandboxes"
    rules.write_text(text, encoding="utf-8", errors="surrogatepass")
    errors: tuple[object, ...] = ("none raised",)
    try:
        parse_policy(
            str(rules),
            extra_rules=extra,
            cwd=str(tmp_path),
            env={"A": "x", "HOME": str(tmp_path)},
            resolve_host=fake_resolver,
        )
    except ConfigSyntaxError as exc:
        errors = exc.errors
    assert errors  # a refusal always says why


@FUZZ
@given(text=st.text(max_size=400))
def test_arbitrary_text(tmp_path_factory: object, text: str) -> None:
    from tempfile import TemporaryDirectory

    with TemporaryDirectory() as tmp:
        check(Path(tmp), text.replace("\x00", ""), [])


@FUZZ
@given(lines=st.lists(any_line, max_size=12), extra=st.lists(rule_line, max_size=3))
def test_arbitrary_rule_lines(lines: list[str], extra: list[str]) -> None:
    from tempfile import TemporaryDirectory

    with TemporaryDirectory() as tmp:
        check(Path(tmp), "\n".join(lines), [e.replace("\n", " ") for e in extra])
