"""Named sandboxes: several ``sandboxes()`` with different rules open at once, each its
own child; ``@sandbox(profile=...)`` routes to one. A web-fetch tool and a calculator
get different rights in one process, even called from two threads at the same time.
"""

from __future__ import annotations

from partiallab import App  # type: ignore[import-not-found]

from listener import Listener  # type: ignore[import-not-found]

TOOLS = """
    import os, time
    from pysandboxes import sandbox

    # Which child: each imports this module afresh (pids repeat: each child is pid 2
    # of a pid namespace of its own).
    PROCESS = os.urandom(8).hex()

    @sandbox(profile="fetch")
    def fetch(port):
        import socket
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            return conn.recv(5), PROCESS

    @sandbox(profile="calculator")
    def calculate(expression_parts):
        time.sleep(0.5)
        return sum(expression_parts), PROCESS

    @sandbox(profile="calculator")
    def calculator_fetch(port):
        import socket
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            return conn.recv(5)

    @sandbox(profile="nowhere")
    def lost():
        return 1
"""


def test_two_profiles_serve_two_threads_at_once_each_with_its_own_rights(
    app: App, tcp: Listener
) -> None:
    result = app.run(
        f"""
        import threading, time, tools
        from pysandboxes import sandboxes, SandBoxError
        results = {{}}

        def run(name, call):
            start = time.monotonic()
            for _ in range(3):
                results[name] = call()
            results[name + " took"] = time.monotonic() - start

        with sandboxes(profile="fetch", python_import="os, time, socket",
                       net="ALLOW|tcp|127.0.0.1|{tcp.port}|OUT"), \\
                sandboxes(profile="calculator", python_import="os, time, socket"):
            threads = [
                threading.Thread(target=run, args=("fetch", lambda: tools.fetch({tcp.port}))),
                threading.Thread(target=run, args=("calc", lambda: tools.calculate([1, 2]))),
            ]
            start = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            print("overlapped", time.monotonic() - start < 1.5 + 1.0)
            print(results["fetch"][0], results["calc"][0])
            print("two children", results["fetch"][1] != results["calc"][1])
            try:
                tools.calculator_fetch({tcp.port})
            except ConnectionRefusedError as exc:
                print("calculator refused", isinstance(exc, SandBoxError))
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "overlapped True",
        "b'hello' 3",
        "two children True",
        "calculator refused True",
    ]
    assert tcp.received == 3  # the fetch tool's connections only


def test_an_unknown_profile_is_a_clear_error(app: App) -> None:
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes, SandBoxError
        with sandboxes(profile="fetch", python_import="os"):
            try:
                tools.lost()
            except SandBoxError as exc:
                print(exc)
        try:
            sandboxes(profile=3)
        except TypeError as exc:
            print(exc)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    lost, bad = result.stdout.splitlines()
    assert "tools.lost is a @sandbox function, called outside any" in lost
    assert "`with sandboxes(profile='nowhere'):`" in lost
    assert "Entered now: 'fetch'." in lost
    assert "profile must be a name (str), not int" in bad
