"""Verdicts per family, table-driven, as the established format decides them.

Where the reference was wrong, the test says so and checks the deliberate difference.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import Parse
from pysandboxes._policy.judge import ApiJudge, FileJudge, ImportJudge, NetJudge
from pysandboxes._policy.model import Access

# --- files --------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for sub in ("data", "data/deep", "logs", "src/pkg", ".secrets", "node/.env"):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
    return tmp_path


FILE_RULES = """\
expose-rw=.
expose-ro=./data
expose-rw=./data/deep
ignore=.env
ignore=*.log
ignore=.secrets
ignore=src/**/generated_*.py
ignore=/etc/shadow
"""

FILE_CASES = [
    # path (relative to the tree), access, allowed, hidden, deciding line
    ("app.py", Access.READ, True, False, 1),
    ("app.py", Access.WRITE, True, False, 1),
    ("data/in.txt", Access.READ, True, False, 2),
    ("data/out.txt", Access.WRITE, False, False, 2),  # ro inside rw: longest wins
    ("data/out.txt", Access.CREATE, False, False, 2),
    ("data/out.txt", Access.DELETE, False, False, 2),
    ("data/deep/x", Access.WRITE, True, False, 3),  # rw inside ro inside rw
    (".env", Access.READ, False, True, 4),  # ignore wins over expose
    ("node/.env/inner", Access.READ, False, True, 4),  # and hides what is below
    ("logs/today.log", Access.READ, False, True, 5),
    (".secrets/key", Access.READ, False, True, 6),
    ("src/pkg/generated_a.py", Access.READ, False, True, 7),  # deliberate: `/` and `**` work
    ("src/generated_b.py", Access.READ, False, True, 7),
    ("src/pkg/handwritten.py", Access.READ, True, False, 1),
]


@pytest.mark.parametrize(("path", "access", "allowed", "hidden", "line"), FILE_CASES)
def test_file_verdicts(
    parse: Parse, tree: Path, path: str, access: Access, allowed: bool, hidden: bool, line: int
) -> None:
    policy = parse(FILE_RULES)
    verdict = FileJudge(policy.expose, policy.ignore).judge(str(tree / path), access)
    assert (verdict.allowed, verdict.hidden) == (allowed, hidden)
    assert verdict.rule is not None
    assert verdict.rule.line == line


def test_unexposed_path_is_hidden_with_the_line_to_add(parse: Parse, tree: Path) -> None:
    policy = parse("expose-ro=./data\n")
    judge = FileJudge(policy.expose, policy.ignore)
    verdict = judge.judge("/etc/passwd", Access.READ)
    assert (verdict.allowed, verdict.hidden, verdict.rule) == (False, True, None)
    assert verdict.fix == "expose-ro=/etc/passwd"
    assert judge.judge("/etc/passwd", Access.WRITE).fix == "expose-rw=/etc/passwd"
    write = judge.judge(str(tree / "data" / "x"), Access.WRITE)
    assert write.fix == f"expose-rw={tree}/data/x"


RENAMES = [
    # source, target, refused: whether the rename could take a match out of the pattern
    ("src/pkg", "src/lib", False),  # src/**/generated_*.py: src/lib/generated_a.py matches
    ("src", "source", True),  # the fixed directory of the pattern (an anchor) itself
    ("logs", "old-logs", False),  # no anchored pattern reaches there
    ("app/secrets", "app/public", True),
    ("app/other", "app/more", False),  # ** takes "other" and "more" alike
    ("app/other", "../elsewhere", True),  # out of the base: nothing would match there
]


@pytest.mark.parametrize(("source", "target", "refused"), RENAMES)
def test_renames_that_would_carry_files_out_of_an_ignore_pattern(
    parse: Parse, tree: Path, source: str, target: str, refused: bool
) -> None:
    policy = parse(FILE_RULES + "ignore=**/secrets/*.key\n")
    judge = FileJudge(policy.expose, policy.ignore)
    moved = judge.carries_ignored(str(tree / source), os.path.normpath(tree / target))
    deleted = judge.judge(str(tree / source), Access.DELETE)
    assert (moved is not None or not deleted.allowed) == refused


def test_absolute_ignore_pattern(parse: Parse) -> None:
    policy = parse("expose-ro=/etc\nignore=/etc/shad*\n")
    judge = FileJudge(policy.expose, policy.ignore)
    assert not judge.judge("/etc/shadow", Access.READ).allowed
    assert judge.judge("/etc/hostname", Access.READ).allowed


def test_lexical_dotdot_cannot_escape(parse: Parse, tree: Path) -> None:
    policy = parse("expose-ro=./data\n")
    judge = FileJudge(policy.expose, policy.ignore)
    assert not judge.judge(f"{tree}/data/../logs/x", Access.READ).allowed


def test_prefix_of_a_name_is_not_a_parent(parse: Parse, tree: Path) -> None:
    (tree / "database").mkdir()
    policy = parse("expose-ro=./data\n")
    judge = FileJudge(policy.expose, policy.ignore)
    assert not judge.judge(str(tree / "database" / "x"), Access.READ).allowed


def test_protected_rule_files_cannot_be_modified(parse: Parse, tree: Path) -> None:
    policy = parse("expose-rw=.\n")
    judge = FileJudge(policy.expose, policy.ignore, protected=policy.rule_files)
    rules = str(tree / ".py-sandboxes")
    assert judge.judge(rules, Access.READ).allowed
    for access in (Access.WRITE, Access.CREATE, Access.DELETE):
        verdict = judge.judge(rules, access)
        assert (verdict.allowed, verdict.hidden) == (False, False)
    # The directory holding it may not be removed or renamed, nor (being the exposed path
    # itself, in a directory that is not writable) created again; entries in it may.
    assert not judge.judge(str(tree), Access.DELETE).allowed
    assert judge.judge(str(tree), Access.CREATE).fix == "<exposure-root>"
    assert judge.judge(str(tree / "new.txt"), Access.CREATE).allowed


# --- network ------------------------------------------------------------------------

NET_RULES = """\
net=ALLOW|tcp|127.0.0.0/8|80,443,8000-8100|OUT
net=DENY|*|127.0.0.2|*|OUT
net=ALLOW|udp|10.0.0.0/8|53|OUT
net=ALLOW|tcp|::1|9000|IN,OUT
net=ALLOW|tcp|*|7070|IN
net=ALLOW|tcp|api.example.test|443|OUT
"""

NET_CASES = [
    ("tcp", "127.0.0.1", 80, "OUT", True, 1),
    ("tcp", "127.0.0.1", 8050, "OUT", True, 1),
    ("tcp", "127.0.0.1", 81, "OUT", False, None),
    ("tcp", "127.0.0.2", 80, "OUT", False, 2),  # DENY beats ALLOW whatever the width
    ("udp", "127.0.0.1", 80, "OUT", False, None),  # a tcp rule does not let UDP through
    ("udp", "10.1.2.3", 53, "OUT", True, 3),
    ("tcp", "10.1.2.3", 53, "OUT", False, None),
    ("tcp", "::ffff:127.0.0.1", 80, "OUT", True, 1),  # IPv4-mapped
    ("tcp", "::ffff:127.0.0.2", 80, "OUT", False, 2),
    ("tcp", "64:ff9b::7f00:2", 80, "OUT", False, 2),  # NAT64
    ("tcp", "::127.0.0.2", 80, "OUT", False, 2),  # compatible
    ("tcp", "::ffff:0:127.0.0.2", 80, "OUT", False, 2),  # translated
    ("tcp", "0x7f.2", 80, "OUT", False, 2),  # alternative IPv4 spellings
    ("tcp", "2130706434", 80, "OUT", False, 2),
    ("tcp", "0177.0.0.2", 80, "OUT", False, 2),
    ("tcp", "127.1", 80, "OUT", True, 1),
    ("tcp", "0.0.0.0", 80, "OUT", True, 1),  # reaches this host
    ("tcp", "::1", 9000, "IN", True, 4),
    ("tcp", "[::1]", 9000, "OUT", True, 4),
    ("tcp", "::", 9000, "OUT", True, 4),
    ("tcp", "0.0.0.0", 7070, "IN", True, 5),
    ("tcp", "0.0.0.0", 7070, "OUT", False, None),
    ("tcp", "192.0.2.10", 443, "OUT", True, 6),  # pinned hostname
    ("tcp", "2001:db8::10", 443, "OUT", True, 6),
    ("tcp", "192.0.2.11", 443, "OUT", False, None),
]


@pytest.mark.parametrize(("proto", "address", "port", "direction", "allowed", "line"), NET_CASES)
def test_net_verdicts(
    parse: Parse,
    proto: str,
    address: str,
    port: int,
    direction: str,
    allowed: bool,
    line: int | None,
) -> None:
    verdict = NetJudge(parse(NET_RULES).net).judge(proto, address, port, direction)
    assert verdict.allowed == allowed
    assert (verdict.rule.line if verdict.rule else None) == line


def test_net_default_deny_names_the_line_to_add(parse: Parse) -> None:
    verdict = NetJudge(parse(NET_RULES).net).judge("tcp", "127.0.0.1", 81, "OUT")
    assert verdict.fix == "net=ALLOW|tcp|127.0.0.1|81|OUT"


def test_hostnames_are_pinned(parse: Parse) -> None:
    policy = parse("net=ALLOW|tcp|api.example.test|443|OUT\nnet=DENY|tcp|db.internal|*|OUT\n")
    assert dict(policy.pins) == {
        "api.example.test": ("192.0.2.10", "2001:db8::10"),
        "db.internal": ("10.0.0.5",),
    }
    assert policy.net[0].host == "api.example.test"


def test_unresolvable_allow_warns_and_deny_fails(parse: Parse) -> None:
    policy = parse("net=ALLOW|tcp|nowhere.test|443|OUT\n")
    assert policy.net == ()
    assert "does not resolve" in policy.warnings[0]
    with pytest.raises(Exception, match="does not resolve"):
        parse("net=DENY|tcp|nowhere.test|443|OUT\n")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ALLOW|tcp|*|80", "5 fields, found 4"),
        ("allow|tcp|*|80|OUT", "action 'allow' must be ALLOW or DENY"),
        ("ALLOW|icmp|*|80|OUT", "unknown protocol 'icmp'"),
        ("ALLOW|*,tcp|*|80|OUT", "a wildcard stands alone"),
        ("ALLOW|tcp|*|70000|OUT", "invalid port list"),
        ("ALLOW|tcp|*|90-80|OUT", "invalid port list"),
        ("ALLOW|tcp|*|80|out", "direction 'out'"),
        ("ALLOW|tcp|300.1.1.1/8|80|OUT", "is not an address, network or name"),
    ],
)
def test_bad_net_rules(parse: Parse, value: str, message: str) -> None:
    with pytest.raises(Exception, match=message.replace("*", r"\*")):
        parse(f"net={value}\n")


def test_net_open_port_range_and_empty_ports(parse: Parse) -> None:
    policy = parse("net=ALLOW|tcp|*|1024-|OUT\nnet=ALLOW|udp|*||OUT\n")
    judge = NetJudge(policy.net)
    # A documentation address: a wildcard does not reach loopback (the SSRF defaults).
    assert judge.judge("tcp", "192.0.2.1", 65535, "OUT").allowed
    assert not judge.judge("tcp", "192.0.2.1", 1023, "OUT").allowed
    assert not judge.judge("udp", "192.0.2.1", 53, "OUT").allowed
    assert "names no port" in policy.warnings[0]


# --- imports ------------------------------------------------------------------------


def test_import_verdicts(parse: Parse) -> None:
    policy = parse("python-import=json, os\npython-import=email.mime\n")
    judge = ImportJudge(policy)
    assert judge.judge("json").allowed
    assert judge.judge("json.decoder").allowed  # a submodule is judged on its top level
    # A dotted rule grants nothing, as in the established format; a warning says why.
    assert not judge.judge("email.parser").allowed
    refused = judge.judge("csv")
    assert (refused.allowed, refused.fix) == (False, "python-import=csv")
    assert "python-import rule 'email.mime' never matches" in policy.warnings[0]


def test_import_star_allows_everything(parse: Parse) -> None:
    assert ImportJudge(parse("python-import=*\n")).judge("anything.at.all").allowed


def test_bad_module_names(parse: Parse) -> None:
    with pytest.raises(Exception, match="'1abc' is not a module name"):
        parse("python-import=json,1abc\n")


# --- sensitive calls ----------------------------------------------------------------

API_CASES = [
    ("", "os.system", False, None),  # default: every registered function denied
    ("", "os.getcwd", True, None),  # not registered, not sensitive
    ("python-api=ALLOW:process-exec", "subprocess.run", True, 1),
    ("python-api=ALLOW:process-exec\npython-api=DENY:os.system", "os.system", False, 2),
    ("python-api=ALLOW:process-exec\npython-api=DENY:os.system", "subprocess.run", True, 1),
    ("python-api=ALLOW:*\npython-api=DENY:*", "os.system", False, 2),
    ("python-api=ALLOW:*\npython-api=DENY:threads", "os.system", True, 1),
    ("python-api=ALLOW:*\npython-api=DENY:threads", "threading.Thread.start", False, 2),
    ("python-api=DENY:*\npython-api=ALLOW:threads", "threading.Thread.start", True, 2),
    ("python-api=DENY:process-exec\npython-api=ALLOW:os.system", "os.system", True, 2),
    ("python-api=ALLOW:os.system\npython-api=DENY:os.system", "os.system", False, 2),
]


@pytest.mark.parametrize(("rules", "qualname", "allowed", "line"), API_CASES)
def test_api_verdicts(
    parse: Parse, rules: str, qualname: str, allowed: bool, line: int | None
) -> None:
    verdict = ApiJudge(parse(rules + "\n")).judge(qualname)
    assert verdict.allowed == allowed
    assert (verdict.rule.line if verdict.rule else None) == line


def test_api_refusal_names_category_and_fix(parse: Parse) -> None:
    verdict = ApiJudge(parse("")).judge("os.system")
    assert (verdict.category, verdict.fix) == ("process-exec", "python-api=ALLOW:os.system")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ALLOW:nope", "unknown category 'nope'"),
        ("ALLOW:os.nope", "'os.nope' is not a registered sensitive function"),
        ("ALLOW:os.sytem", "did you mean 'os.system'?"),
        ("threads", "expected python-api=ALLOW:targets or DENY:targets"),
        ("ALLOW:", "empty target"),
        ("ALLOW:threads,DENY:native", "one action per line"),
    ],
)
def test_bad_api_rules(parse: Parse, value: str, message: str) -> None:
    with pytest.raises(Exception, match=message.replace("*", r"\*").replace("?", r"\?")):
        parse(f"python-api={value}\n")
