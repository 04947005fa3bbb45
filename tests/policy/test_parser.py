"""The parser: every key, every error at once, and the deliberate differences."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import Parse
from pysandboxes import ConfigSyntaxError
from pysandboxes._policy.judge import FileJudge
from pysandboxes._policy.model import Access


def errors_of(parse: Parse, text: str, **kwargs: object) -> list[str]:
    with pytest.raises(ConfigSyntaxError) as caught:
        parse(text, **kwargs)
    return [str(issue) for issue in caught.value.errors]


# --- lexical format -----------------------------------------------------------------


def test_comments_blank_lines_and_quotes(parse: Parse) -> None:
    policy = parse('# a comment\n\n  env=Q="a # b"   # trailing\nenv=R=x#y\n')
    assert [(r.name, r.template) for r in policy.env] == [("Q", '"a # b"'), ("R", "x")]
    assert policy.env[0].origin.line == 3
    assert policy.env[0].origin.text == 'env=Q="a # b"'


def test_every_error_of_every_file_reported_at_once(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "inc.profile").write_text("net=ALLOW|tcp|*|99999|OUT\n")
    found = errors_of(
        parse,
        'bogus-key=1\ninclude "inc.profile"\nexpose-rw=./no/x\nos-sandbox=docker\n',
    )
    assert found == [
        ".py-sandboxes(1): unknown key 'bogus-key' in 'bogus-key=1'",
        f".py-sandboxes(3): 'expose-rw=./no/x': '{tmp_path}/no/x' does not exist, nor can "
        "its directory hold it",
        ".py-sandboxes(4): os-sandbox 'docker' is unknown: use one of landlock, unshare, "
        "bwrap, subprocess, none.",
        "inc.profile(1): 'net=ALLOW|tcp|*|99999|OUT': invalid port list '99999' "
        "(use *, N, A-B, A- or a comma list)",
    ]


def test_config_error_message_lists_file_and_line(parse: Parse) -> None:
    with pytest.raises(ConfigSyntaxError) as caught:
        parse("expose-ro=.\nEXPOSE-RO=.\n")
    assert str(caught.value) == (
        "Syntax error in config files.\n"
        "  .py-sandboxes(2): unknown key 'EXPOSE-RO' in 'EXPOSE-RO=.': did you mean 'expose-ro'?"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("os-sandbox = landlock", "no spaces around '='"),
        ("expose_ro=.", "did you mean 'expose-ro'?"),
        ("foo.bar=1", "unknown provider 'foo'"),
        ("bwarp.hostname=x", "did you mean 'bwrap.hostname'?"),
        ("bwrap.hostnme=x", "Did you mean 'bwrap.hostname'?"),
        ("pyton-import=json", "did you mean 'python-import'?"),
        ("just text", "expected key=value"),
        ("{template line}", "expected key=value"),
    ],
)
def test_unknown_keys_are_errors_with_a_hint(parse: Parse, line: str, message: str) -> None:
    (found,) = errors_of(parse, line + "\n")
    assert found.startswith(".py-sandboxes(1): ")
    assert message in found


def test_foreign_provider_options_are_ignored_with_a_warning(parse: Parse) -> None:
    policy = parse("qemu.memory=2G\nfirejail.net=br0\n")
    assert len(policy.warnings) == 2
    assert "qemu provider is not shipped" in policy.warnings[0]


def test_provider_options_of_shipped_providers(parse: Parse) -> None:
    policy = parse("bwrap.hostname=box\nunshare.proc=mount\n")
    assert [(o.provider, o.option, o.value) for o in policy.provider_options] == [
        ("bwrap", "hostname", "box"),
        ("unshare", "proc", "mount"),
    ]


# --- variables ----------------------------------------------------------------------


def test_variables_expand_with_nested_defaults(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    policy = parse("expose-ro=${A:-${B:-./x}}\n", env={"B": "./d"})
    assert policy.expose[0].path == str(tmp_path / "d")


def test_malformed_reference_is_a_config_error_everywhere(parse: Parse) -> None:
    found = errors_of(parse, 'env=X=${A:B}\nexpose-ro=${A:B}\ninclude "${A:B}"\n')
    assert len(found) == 3
    assert all("invalid variable reference '${A:B}'" in f for f in found)


def test_expanded_value_is_not_expanded_again(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "${B}").mkdir()
    policy = parse("expose-ro=./${A}\n", env={"A": "${B}", "B": "nope"})
    assert policy.expose[0].path == str(tmp_path / "${B}")


# --- files --------------------------------------------------------------------------


def test_relative_paths_resolve_against_the_rule_file(tmp_path: Path) -> None:
    """Deliberate difference: the reference resolved them against the cwd."""
    from conftest import fake_resolver
    from pysandboxes._policy.parser import parse_policy

    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / ".py-sandboxes").write_text("expose-ro=./data\nlearn=out.rules\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    policy = parse_policy(
        str(project / ".py-sandboxes"),
        extra_rules=["expose-rw=."],
        cwd=str(elsewhere),
        env={},
        resolve_host=fake_resolver,
    )
    assert {(r.path, r.writable) for r in policy.expose} == {
        (str(elsewhere), True),  # a command-line rule: relative to the cwd
        (str(project / "data"), False),
    }
    assert policy.learn is not None
    assert policy.learn.value == str(project / "out.rules")
    # A file outside the cwd is shown with its absolute path.
    assert policy.expose[1].origin.source == str(project / ".py-sandboxes")


def test_single_file_may_be_exposed(parse: Parse, tmp_path: Path) -> None:
    """Deliberate difference: the reference accepted only directories."""
    (tmp_path / "config.toml").write_text("x = 1\n")
    (tmp_path / "other.toml").write_text("y = 2\n")
    policy = parse("expose-ro=./config.toml\n")
    judge = FileJudge(policy.expose, policy.ignore)
    assert judge.judge(str(tmp_path / "config.toml"), Access.READ).allowed
    assert not judge.judge(str(tmp_path / "other.toml"), Access.READ).allowed


def test_same_path_read_only_and_read_write_is_an_error(parse: Parse) -> None:
    (found,) = errors_of(parse, "expose-ro=.\nexpose-rw=.\n")
    assert "cannot be both read-only and read-write" in found
    assert "from .py-sandboxes(1)" in found


def test_identical_exposures_merge(parse: Parse) -> None:
    assert len(parse("expose-ro=.\nexpose-ro=./\n").expose) == 1


def test_symlinked_exposure_is_stored_as_its_real_path(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert parse("expose-ro=./link\n").expose[0].path == str(tmp_path / "real")


def test_a_file_to_be_created_is_exposed_by_its_name(parse: Parse, tmp_path: Path) -> None:
    # A clean checkout has no app.log yet: the rule names the file the program makes.
    policy = parse("expose-rw=./app.log\nexpose-rw=./out/\n")
    assert [(r.path, r.writable, r.is_dir) for r in policy.expose] == [
        (str(tmp_path / "app.log"), True, False),
        (str(tmp_path / "out"), True, True),
    ]


def test_a_missing_file_to_read_is_a_warning_not_a_stop(parse: Parse, tmp_path: Path) -> None:
    policy = parse("expose-ro=./gone.txt\n")
    assert policy.expose == ()
    assert policy.warnings == (
        f".py-sandboxes(1): 'expose-ro=./gone.txt': '{tmp_path}/gone.txt' does not exist: "
        "the rule grants nothing",
    )


def test_cant_create_through_a_dangling_link(parse: Parse, tmp_path: Path) -> None:
    # A link to a missing file would grant its target once something made it there.
    (tmp_path / "log").symlink_to(tmp_path / "elsewhere" / "secret")
    (found,) = errors_of(parse, "expose-rw=./log\n")
    assert "does not exist, nor can its directory hold it" in found


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("expose-ro=", "the path is empty"),
        ("expose-ro=${UNSET}", "the path is empty"),
        ("expose-rw=./nope/x", "does not exist"),
        ("ignore=", "the pattern is empty"),
    ],
)
def test_bad_paths(parse: Parse, line: str, message: str) -> None:
    (found,) = errors_of(parse, line + "\n")
    assert message in found


# --- includes -----------------------------------------------------------------------


def test_include_paths_resolve_against_the_including_file(tmp_path: Path, parse: Parse) -> None:
    """Deliberate difference: `inc/x` was resolved against the cwd by the reference."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "a.profile").write_text('python-import=json\ninclude "b.profile"\n')
    (tmp_path / "inc" / "b.profile").write_text("python-import=csv\n")
    policy = parse('include "inc/a.profile"\n')
    assert {m for rule in policy.imports for m in rule.modules} == {"json", "csv"}
    assert policy.imports[1].origin.source == os.path.join("inc", "b.profile")


def test_include_expands_variables_and_home(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "p.profile").write_text("python-import=json\n")
    policy = parse('include "${DIR}/p.profile"\n', env={"DIR": str(tmp_path)})
    assert policy.imports[0].modules == frozenset({"json"})


def test_missing_optional_include_adds_nothing_but_is_protected(
    parse: Parse, tmp_path: Path
) -> None:
    policy = parse('include-optional "later.profile"\n')
    assert str(tmp_path / "later.profile") in policy.rule_files
    assert policy.rule_files[0] == str(tmp_path / ".py-sandboxes")


def test_include_cycles_are_read_once(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "a").write_text('include "b"\npython-import=json\n')
    (tmp_path / "b").write_text('include "a"\ninclude "b"\n')
    policy = parse('include "a"\n')
    assert len(policy.imports) == 1


def test_include_platform(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "l.profile").write_text("python-import=json\n")
    (tmp_path / "w.profile").write_text("python-import=winreg\n")
    policy = parse('include-platform=linux "l.profile"\ninclude-platform=win32 "w.profile"\n')
    assert [set(r.modules) for r in policy.imports] == [{"json"}]


def test_include_needs_quotes_and_readable_file(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "dir.profile").mkdir()
    found = errors_of(parse, 'include foo.profile\ninclude "dir.profile"\n')
    assert 'expected include "path"' in found[0]
    assert "is a directory" in found[1]


def test_unreadable_include_is_an_error(
    parse: Parse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Skipping it could silently drop a learn=false lock."""
    locked = tmp_path / "locked.profile"
    locked.write_text("learn=false\n")
    real_open = open

    def refuse(path: str, *args: object, **kwargs: object) -> object:
        if path == str(locked):  # root reads any file, so the refusal is simulated
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("pysandboxes._policy.lines.open", refuse, raising=False)
    (found,) = errors_of(parse, 'include "locked.profile"\n')
    assert found == ".py-sandboxes(1): cannot read 'locked.profile': Permission denied"


# --- single-valued keys and the lock ------------------------------------------------


def test_single_valued_key_at_most_once_in_files(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "inc").write_text("os-sandbox=landlock\n")
    (found,) = errors_of(parse, 'os-sandbox=landlock\ninclude "inc"\n')
    assert "os-sandbox is set more than once (.py-sandboxes(1) and inc(1))" in found


def test_command_line_overrides_single_valued_keys(parse: Parse) -> None:
    policy = parse("os-sandbox=landlock\nos-sandbox=bwrap\n", extra=["os-sandbox=subprocess"])
    assert policy.os_sandbox is not None
    assert policy.os_sandbox.value == "subprocess"


@pytest.mark.parametrize(
    ("line", "field", "value"),
    [
        ("py-sandbox=FALSE", "py_sandbox", False),
        ("py-sandbox=", "py_sandbox", True),
        ("os-sandbox=LandLock", "os_sandbox", "landlock"),
        ("os-sandbox=${OS_SANDBOX:-landlock}", "os_sandbox", "landlock"),
        ("remote-result-mode=data-only", "remote_result_mode", "values"),
        ("remote-result-mode=objects", "remote_result_mode", "objects"),
        ("remote-result-guard=off", "remote_result_guard", False),
    ],
)
def test_single_valued_keys(parse: Parse, line: str, field: str, value: object) -> None:
    setting = getattr(parse(line + "\n"), field)
    assert setting.value == value


def test_learn_false_locks_the_command_line(parse: Parse) -> None:
    found = errors_of(parse, "expose-ro=.\nlearn=false\n", extra=["expose-ro=/etc"])
    assert found == [
        ".py-sandboxes(2): 'learn=false' locks the rules: the command line cannot add "
        "'expose-ro=/etc'"
    ]


def test_learn_false_refuses_learning_requested_anywhere(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "inc").write_text("learn=false\n")
    (found,) = errors_of(parse, 'learn=out\ninclude "inc"\n')
    assert "learning is locked by learn=false, but requested by 'learn=out'" in found
    (found,) = errors_of(parse, 'include "inc"\n', extra=["learn="])
    assert "requested by 'learn=' from <arg>(1)" in found


def test_learn_values(parse: Parse, tmp_path: Path) -> None:
    policy = parse("learn=\n")
    assert policy.learn is not None
    assert policy.learn.value == str(tmp_path / ".py-sandboxes")
    assert "learn= takes the file to write" in errors_of(parse, "learn=true\n")[0]
    assert "must exist" in errors_of(parse, "learn=./no/such/dir/f\n")[0]


def test_port_is_accepted_for_compatibility_with_a_warning(parse: Parse) -> None:
    assert "no effect" in parse("port=8765\n").warnings[0]
    assert "port must be a number" in errors_of(parse, "port=-1\n")[0]


# --- found by the documentation review ----------------------------------------------


def test_command_line_include_cannot_pass_the_lock(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "wide.profile").write_text("expose-rw=/\n")
    (found,) = errors_of(parse, "learn=false\n", extra=['include "wide.profile"'])
    assert "the command line cannot add 'expose-rw=/'" in found


def test_file_included_twice_counts_once(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "x").write_text("os-sandbox=landlock\n")
    policy = parse('include "x"\ninclude "x"\n')
    assert policy.os_sandbox is not None


def test_byte_order_mark_is_not_part_of_the_first_key(parse: Parse) -> None:
    assert parse("\ufeffpython-import=json\n").imports[0].modules == frozenset({"json"})


def test_values_expand_in_every_key(parse: Parse) -> None:
    env = {"SECRET": "OPENAI_API_KEY", "MODS": "json, csv", "CAT": "threads"}
    policy = parse("unenv=${SECRET}\npython-import=${MODS}\npython-api=ALLOW:${CAT}\n", env=env)
    assert policy.unenv[0].pattern == "OPENAI_API_KEY"
    assert policy.imports[0].modules == frozenset({"json", "csv"})
    assert policy.api[0].targets == ("threads",)


def test_learn_from_an_unset_variable_does_not_learn(parse: Parse) -> None:
    assert parse("learn=${LEARN_TO}\n").learn is None
    assert parse("learn=${LEARN_TO}\n", env={"LEARN_TO": "out"}).learn is not None


def test_home_comes_from_the_same_environment_as_variables(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    policy = parse("expose-ro=~/cfg\n", env={"HOME": str(tmp_path)})
    assert policy.expose[0].path == str(tmp_path / "cfg")


def test_pyproject_errors_carry_their_line(parse: Parse) -> None:
    text = '[tool.py-sandboxes]\nexpose-ro = ["."]\neval-timeout = 5\n'
    (found,) = errors_of(parse, text, name="pyproject.toml")
    assert found.startswith("pyproject.toml(3): ")


def test_rules_read_from_pyproject(parse: Parse, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    text = '[tool.py-sandboxes]\nexpose-ro = [\n  "./data",\n]\nos-sandbox = "bwrap"\n'
    policy = parse(text, name="pyproject.toml")
    assert policy.expose[0].path == str(tmp_path / "data")
    assert policy.expose[0].origin.where == "pyproject.toml(3)"
    assert policy.os_sandbox is not None
    assert policy.os_sandbox.value == "bwrap"
