"""Partial mode's walls: the application keeps its rights, the sandboxed functions do not
get them, and nothing the child sends runs in the application.

Each probe is first run by the application itself (the positive control: it works),
then by a ``@sandbox`` function, where it is refused and leaves no trace.
"""

from __future__ import annotations

from pathlib import Path

from partiallab import App  # type: ignore[import-not-found]

from listener import Listener  # type: ignore[import-not-found]

TOOLS = """
    import os
    from pysandboxes import sandbox

    @sandbox
    def read(path):
        with open(path) as handle:
            return handle.read()

    def read_here(path):
        with open(path) as handle:
            return handle.read()

    @sandbox
    def variable(name):
        return os.environ.get(name)

    @sandbox
    def connect(port):
        import socket
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            return conn.recv(10)

    @sandbox
    def load(name):
        import importlib
        return importlib.import_module(name).__name__

    @sandbox
    def write(path):
        with open(path, "w") as handle:
            handle.write("written")

    class Gadget:
        def __reduce__(self):
            return (os.system, ("touch " + os.environ["MARK"],))

    @sandbox
    def gadget():
        return Gadget()

    class Point:
        def __init__(self, x, y):
            self.x, self.y = x, y

    @sandbox
    def point():
        return Point(1, 2)
"""
RULES = "python-import=os\npython-import=socket\npython-import=importlib\n"


def _rules(app: App, extra: str = "") -> None:
    (app.project / ".py-sandboxes").write_text(RULES + extra)


def test_cant_read_a_file_of_the_application_the_rules_do_not_expose(
    app: App, tmp_path: Path
) -> None:
    secret = tmp_path / "token.txt"
    secret.write_text("s3cr3t")
    _rules(app)
    result = app.run(
        f"""
        import tools
        from pysandboxes import sandboxes, SandBoxError
        print("control", tools.read_here({str(secret)!r}))
        with sandboxes():
            for kind in (FileNotFoundError, SandBoxError):
                try:
                    tools.read({str(secret)!r})
                except kind as exc:
                    print("refused", type(exc).__name__, "expose-ro=" in str(exc))
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "control s3cr3t",
        "refused RuleFileNotFoundError True",
        "refused RuleFileNotFoundError True",
    ]


def test_cant_write_outside_the_rules(app: App, tmp_path: Path) -> None:
    target = tmp_path / "planted.txt"
    _rules(app)
    result = app.run(
        f"""
        import tools
        from pysandboxes import sandboxes
        with sandboxes():
            try:
                tools.write({str(target)!r})
            except OSError as exc:  # not exposed: it looks absent
                print("refused", type(exc).__name__)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["refused", "RuleFileNotFoundError"]
    assert not target.exists()


def test_cant_see_the_applications_secret_variables(app: App) -> None:
    _rules(app, "env=VISIBLE=${VISIBLE}\n")
    result = app.run(
        """
        import os, tools
        from pysandboxes import sandboxes
        print("control", os.environ["API_TOKEN"])
        with sandboxes():
            print(tools.variable("API_TOKEN"), tools.variable("VISIBLE"))
        """,
        TOOLS,
        env={"API_TOKEN": "tok-123", "VISIBLE": "shown"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["control tok-123", "None shown"]


def test_cant_connect_where_no_net_rule_allows(app: App, tcp: Listener) -> None:
    _rules(app)
    result = app.run(
        f"""
        import socket, tools
        from pysandboxes import sandboxes
        with socket.create_connection(("127.0.0.1", {tcp.port})) as conn:
            print("control", conn.recv(10))
        with sandboxes():
            try:
                tools.connect({tcp.port})
            except ConnectionRefusedError as exc:
                print("refused", type(exc).__name__)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "control b'hello\\n'",
        "refused RuleSocketConnectionRefusedError",
    ]
    assert tcp.received == 1  # the control's connection only


def test_cant_import_a_module_no_rule_allows(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import wave, tools
        from pysandboxes import sandboxes
        print("control", wave.__name__)
        with sandboxes():
            try:
                tools.load("wave")
            except ModuleNotFoundError as exc:
                print("refused", type(exc).__name__)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["control wave", "refused RuleModuleNotFoundError"]


def test_a_pickle_gadget_in_a_result_never_runs_in_the_application(
    app: App, tmp_path: Path
) -> None:
    mark = tmp_path / "ran"
    _rules(app, "env=MARK=${MARK}\n")
    result = app.run(
        """
        import os, pickle, tools
        from pysandboxes import sandboxes, SandBoxError
        pickle.loads(pickle.dumps(tools.Gadget()))  # control: plain pickle runs it
        print("control", os.path.exists(os.environ["MARK"]))
        os.remove(os.environ["MARK"])
        with sandboxes():
            try:
                tools.gadget()
            except SandBoxError as exc:
                print("refused", "posix.system" in str(exc) or "os.system" in str(exc))
        print("ran", os.path.exists(os.environ["MARK"]))
        """,
        TOOLS,
        env={"MARK": str(mark)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["control True", "refused True", "ran False"]


def test_an_object_result_is_refused_unless_objects_mode_allows_the_apps_class(
    app: App,
) -> None:
    _rules(app)
    main = """
        import tools
        from pysandboxes import sandboxes, SandBoxError
        with sandboxes({rules}):
            try:
                p = tools.point()
                print("rebuilt", type(p) is tools.Point, p.x, p.y)
            except TypeError as exc:
                print("refused", isinstance(exc, SandBoxError))
                print(exc)
        """
    refused = app.run(main.format(rules=""), TOOLS)
    assert refused.returncode == 0, refused.stderr
    lines = refused.stdout.splitlines()
    assert lines[0] == "refused True"
    assert "tools.Point" in lines[1]
    assert "remote-result-mode=objects" in lines[1]
    allowed = app.run(main.format(rules="remote_result_mode='objects'"), TOOLS)
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.splitlines() == ["rebuilt True 1 2"]


def test_a_sandbox_function_called_outside_sandboxes_never_runs(app: App, tmp_path: Path) -> None:
    target = tmp_path / "written.txt"
    result = app.run(
        f"""
        import tools
        from pysandboxes import SandBoxError
        try:
            tools.write({str(target)!r})
        except SandBoxError as exc:
            print("refused:", exc)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert "outside any `with sandboxes():`" in result.stdout
    assert not target.exists()


def test_a_function_in_main_or_nested_is_refused_with_where_to_move_it(app: App) -> None:
    result = app.run(
        """
        from pysandboxes import sandbox

        def in_main():
            pass

        def outer():
            @sandbox
            def nested():
                pass

        for attempt in (lambda: sandbox(in_main), outer):
            try:
                attempt()
            except TypeError as exc:
                print(exc)
        """
    )
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert "defined in __main__" in first
    assert "move it to a module" in first
    assert "inside a function" in second
    assert "top level" in second


def test_the_childs_output_never_reaches_the_applications_descriptors(app: App) -> None:
    (app.project / ".py-sandboxes").write_text(RULES)
    result = app.run(
        """
        import contextlib, io, os
        import tools
        from pysandboxes import sandbox, sandboxes
        captured = io.StringIO()
        with sandboxes(), contextlib.redirect_stdout(captured):
            tools.noisy()
        os.write(1, ("captured:" + captured.getvalue().replace("\\n", "|")).encode())
        """,
        TOOLS
        + """
    @sandbox
    def noisy():
        print("python level")
        os.write(1, b"descriptor level\\n")
""",
    )
    assert result.returncode == 0, result.stderr
    # Both writes went through the application's sys.stdout (captured), none to fd 1.
    assert result.stdout == "captured:python level|descriptor level|"


def test_results_too_deep_or_too_large_are_refused_and_the_child_serves_on(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes, RuleResultRefusedError
        with sandboxes(result_limit=1 << 20):
            for make in (tools.deep, tools.large):
                try:
                    make()
                except RuleResultRefusedError as exc:
                    print("refused", isinstance(exc, TypeError), str(exc)[:40])
            print(len(tools.large_ok()))
        """,
        TOOLS
        + """
    @sandbox
    def deep():
        value = []
        for _ in range(300):
            value = [value]
        return value

    @sandbox
    def large():
        return b"x" * (2 << 20)

    @sandbox
    def large_ok():
        return b"x" * (1 << 19)
""",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("refused True the sandboxed function's result")
    assert lines[1].startswith("refused True the sandboxed function's reply")
    assert lines[2] == str(1 << 19)
