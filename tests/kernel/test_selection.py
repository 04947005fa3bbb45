"""Choosing the kernel provider: the default, the rule, OS_SANDBOX, and never a silent downgrade.

Also the report of which layer enforces each rule (``--show-layers``, and
``pysandboxes.enforcement_report`` for the library).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

RULES = "expose-ro=.\npython-import=*\n"
#: A PATH where no provider program (bwrap, unshare) can be found.
NO_PROGRAMS = {"PATH": "/nonexistent"}
WRITE_MARKER = "open('ran.txt', 'w').close()"


def layers(sb: Runner, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    result = sb(*args, "--show-layers=json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_default_provider_here_is_landlock(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(RULES)
    report = layers(sb)
    assert (report["provider"], report["source"]) == ("landlock", "default")
    assert "ABI" in str(report["detail"])
    rows = {row["rule"]: row for row in report["rules"]}  # type: ignore[union-attr]
    assert rows["expose-ro=."]["kernel"] == "Landlock"
    assert rows["python-import=*"]["kernel"] == ""
    assert "Python layer's only" in rows["python-import=*"]["note"]


def test_an_explicit_provider_that_cannot_run_stops_the_run(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(RULES + "os-sandbox=bwrap\n")
    (project / "ran.txt").unlink(missing_ok=True)
    result = sb("-c", WRITE_MARKER, env=NO_PROGRAMS)
    assert result.returncode == 255, result.stderr
    assert "os-sandbox 'bwrap' cannot run on this host:" in (result.stderr)
    assert "'os-sandbox=bwrap, subprocess'" in result.stderr  # how to accept a weaker layer
    assert not (project / "ran.txt").exists()


def test_a_list_is_consent_to_fall_back_and_says_so(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(
        "expose-rw=.\npython-import=*\nos-sandbox=bwrap, landlock\n"
    )
    result = sb("-c", WRITE_MARKER, env=NO_PROGRAMS)
    assert result.returncode == 0, result.stderr
    assert "os-sandbox 'bwrap' cannot run here (" in result.stderr
    assert "'landlock', next in .py-sandboxes(3), is used instead." in result.stderr
    assert (project / "ran.txt").exists()
    report = layers(sb, env=NO_PROGRAMS)
    assert report["provider"] == "landlock"
    assert [p["provider"] for p in report["passed_over"]] == ["bwrap"]  # type: ignore[union-attr]


def test_os_sandbox_from_the_environment(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(RULES)
    report = layers(sb, env={"OS_SANDBOX": "unshare"})
    assert (report["provider"], report["source"]) == ("unshare", "OS_SANDBOX")
    result = sb("-c", "pass", env={"OS_SANDBOX": "landlok"})
    assert result.returncode == 255
    assert "OS_SANDBOX names an unknown provider 'landlok'" in result.stderr


def test_the_rule_wins_over_the_environment(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(RULES + "os-sandbox=subprocess\n")
    report = layers(sb, env={"OS_SANDBOX": "landlock"})
    assert (report["provider"], report["source"]) == ("subprocess", ".py-sandboxes(3)")


def test_an_unknown_provider_in_a_list_is_a_rule_error(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(RULES + "os-sandbox=landlock, bwarp\n")
    result = sb("-c", "pass")
    assert result.returncode == 255
    assert "os-sandbox 'bwarp' is unknown" in result.stderr
    assert "Did you mean 'bwrap'?" in result.stderr


def test_none_is_no_sandbox_and_is_labelled(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(RULES + "os-sandbox=none\n")
    result = sb("-c", "import os; print(os.system('true'))")
    assert result.stdout == "0\n", result.stderr  # no guard refused it: 'none' is no sandbox
    report = layers(sb)
    assert "no sandbox" in str(report["detail"])


def test_the_plain_report_on_a_pipe(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(RULES + "net=ALLOW|tcp|127.0.0.1|8080|OUT\n")
    result = sb("--show-layers")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("# os-sandbox=landlock (default): Landlock")
    net = next(line.split("\t") for line in lines if "net=ALLOW" in line)
    assert net[2:4] == ["Python", "Landlock (TCP ports)"]
    assert "hosts and addresses" in net[4]


def test_the_library_gives_the_same_report(project: Path) -> None:
    import pysandboxes

    report = pysandboxes.enforcement_report(rules=["expose-ro=."], cwd=str(project))
    assert report["provider"] == os.environ.get("OS_SANDBOX", "landlock")
    assert json.loads(json.dumps(report)) == report


def test_without_a_kernel_layer_the_report_claims_no_seccomp(project: Path) -> None:
    # os-sandbox=subprocess and none have no seccomp filter: no row may say it refuses
    # set-ID modes, and under none no row may say the Python layer refuses signals.
    import pysandboxes

    for provider in ("subprocess", "none"):
        report = pysandboxes.enforcement_report(
            rules=["expose-ro=.", f"os-sandbox={provider}"], cwd=str(project)
        )
        rows = {row["rule"]: row for row in report["rules"]}
        modes = next(row for rule, row in rows.items() if rule.startswith("modes,"))
        assert "seccomp" not in modes["note"], modes
        signals = next(row for rule, row in rows.items() if rule.startswith("signals"))
        assert ("Python layer" in signals["note"]) == (provider == "subprocess"), signals


def test_cant_switch_the_sandbox_off_from_the_environment(
    sb: Runner, py: Runner, project: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("root:hash")
    probe = f"print(open({str(secret)!r}).read())"
    assert py("-c", probe).stdout.strip() == "root:hash"  # the control
    for rules in (RULES, RULES + "learn=false\nos-sandbox=${OS_SANDBOX:-landlock}\n"):
        (project / ".py-sandboxes").write_text(rules)
        for weak in ("none", "subprocess", "landlock, none"):
            result = sb("-c", probe, env={"OS_SANDBOX": weak})
            assert result.returncode == 255, (rules, weak, result.stderr)
            assert "root:hash" not in result.stdout
            assert "came from the environment" in result.stderr
            assert "never subprocess or none" in result.stderr


def test_a_run_without_a_kernel_layer_says_so_on_stderr(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(RULES + "os-sandbox=subprocess\n")
    result = sb("-c", "print('ran')")
    assert result.stdout == "ran\n"
    assert "os-sandbox=subprocess (.py-sandboxes(3)): no kernel layer" in result.stderr
