"""The plan compiled from the rules: what the kernel is asked to grant, and never."""

from __future__ import annotations

from pathlib import Path

from pysandboxes._policy.confinement import MAX_PORTS, compile_plan
from pysandboxes._policy.model import ExposeRule, Origin
from pysandboxes._policy.parser import parse_policy
from pysandboxes._policy.plan import ConfinementPlan

ORIGIN = Origin("<test>", 0, "")
NEVER = ("/", "/etc", "/home", "/root", "/tmp", "/proc", "/dev", "/sys", "/run", "/var")


def plan_of(tmp_path: Path, *rules: str, tempdir: str | None = None) -> ConfinementPlan:
    policy = parse_policy(None, extra_rules=rules, cwd=str(tmp_path), env={})
    exposures = [ExposeRule(r.path, r.writable, r.is_dir, r.origin) for r in policy.expose]
    exposures.append(ExposeRule("/dev/null", True, False, ORIGIN))
    return compile_plan(policy, exposures, tempdir)


def test_no_network_rule_means_no_network(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "expose-ro=.")
    assert not plan.network
    assert (plan.tcp_connect, plan.tcp_bind) == ((), ())
    assert "/etc/resolv.conf" not in plan.read


def test_tcp_ports_come_from_allow_rules_by_direction(tmp_path: Path) -> None:
    plan = plan_of(
        tmp_path,
        "net=ALLOW|tcp|127.0.0.1|8000-8002|OUT",
        "net=ALLOW|tcp|*|443|OUT",
        "net=ALLOW|tcp|127.0.0.1|9000|IN",
        "net=ALLOW|udp|*|53|OUT",
    )
    assert plan.network
    assert plan.tcp_connect == (443, 8000, 8001, 8002)
    assert plan.tcp_bind == (9000,)
    assert "/etc/resolv.conf" in plan.read


def test_too_many_ports_are_left_to_the_python_layer(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, f"net=ALLOW|tcp|*|1-{MAX_PORTS + 1}|OUT")
    assert plan.tcp_connect is None
    assert plan.tcp_bind == ()


def test_no_execute_right_without_process_exec(tmp_path: Path) -> None:
    assert plan_of(tmp_path, "expose-ro=.", "python-api=ALLOW:native").execute == ()
    assert plan_of(tmp_path, "python-api=ALLOW:os.fork").execute == ()


def test_process_exec_grants_execute_on_system_and_exposed_paths(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "expose-ro=.", "python-api=ALLOW:subprocess.run")
    assert "/usr/bin" in plan.execute
    assert "/usr/lib" in plan.execute
    assert str(tmp_path) in plan.execute
    assert "/dev/null" not in plan.execute


def test_tempdir_is_writable_and_never_executable(tmp_path: Path) -> None:
    temp = str(tmp_path / "private")
    plan = plan_of(tmp_path, "python-api=ALLOW:process-exec", tempdir=temp)
    assert plan.tempdir == temp
    assert temp not in plan.execute


def test_devices_are_named_one_by_one(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "expose-ro=.")
    assert plan.devices == ("/dev/null",)
    assert "/dev/null" in plan.write


def test_never_grants_a_whole_system_tree(tmp_path: Path) -> None:
    plan = plan_of(
        tmp_path,
        "expose-ro=.",
        "net=ALLOW|tcp|*|443|OUT",
        "python-api=ALLOW:process-exec",
    )
    for path in NEVER:
        assert path not in plan.read + plan.write + plan.execute, path


def test_unix_sockets_only_where_the_rules_may_need_one(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    # /dev/null is writable in every plan: a device holds no socket file.
    assert not plan_of(tmp_path, "expose-ro=.").unix_sockets
    assert plan_of(tmp_path, "expose-ro=.", "expose-rw=./data").unix_sockets
    assert plan_of(tmp_path, "python-api=ALLOW:os.fork").unix_sockets  # multiprocessing


def test_files_to_be_made_are_planned_with_their_directory(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    plan = plan_of(tmp_path, "expose-rw=./out/app.log", "expose-rw=./build/", "expose-ro=./x.db")
    assert plan.create == (str(tmp_path / "out" / "app.log"),)
    assert plan.create_dirs == (str(tmp_path / "build"),)


def test_cant_gain_a_home_or_the_system_through_a_file_to_be_made(tmp_path: Path) -> None:
    # The kernel grants a file's directory for it: never /etc, / or a home itself, where
    # the files beside it (~/.bashrc) and below it (~/.ssh/authorized_keys) are the machine.
    wide = [ExposeRule(p, True, False, ORIGIN) for p in ("/etc/motd", "/root/notes", "/x")]
    policy = parse_policy(None, extra_rules=(), cwd=str(tmp_path), env={})
    plan = compile_plan(policy, [*wide, ExposeRule("/home/me/notes", True, False, ORIGIN)], None)
    assert plan.create == ()
    deeper = ExposeRule("/home/me/project/app.log", True, False, ORIGIN)
    assert compile_plan(policy, [deeper], None).create == ("/home/me/project/app.log",)


def test_a_shared_interpreter_library_is_in_every_plan(tmp_path: Path) -> None:
    """A shared build's interpreter (pyenv, conda) cannot start without its libpython:
    the programs a sandbox may start load it again, whatever the provider. Without it the
    loader found the system's libpython of the same version, or none."""
    import sysconfig

    from pysandboxes._policy.view import interpreter_libraries, plan_for

    policy = parse_policy(None, extra_rules=["expose-ro=."], cwd=str(tmp_path), env={})
    plan = plan_for(policy, [], None, [], [])
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        assert interpreter_libraries() == []
        return
    library = Path(sysconfig.get_config_var("LIBDIR")) / sysconfig.get_config_var("INSTSONAME")
    assert str(library.resolve()) in interpreter_libraries()
    assert str(library.resolve()) in plan.read
