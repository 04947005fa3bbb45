"""Partial mode learns only when asked, and learns what the functions did, not itself."""

from __future__ import annotations

from partiallab import App  # type: ignore[import-not-found]

TOOLS = """
    import os
    from pysandboxes import sandbox

    @sandbox
    def read(path):
        with open(path) as handle:
            return handle.read()
"""


def test_without_rules_the_sandbox_does_not_start_and_says_how_to_get_some(app: App) -> None:
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes, ConfigSyntaxError
        try:
            with sandboxes():
                tools.read("/etc/hostname")
        except ConfigSyntaxError as exc:
            print(exc)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert "no rule file was found" in result.stdout
    assert "learn='.py-sandboxes'" in result.stdout
    assert not (app.project / ".py-sandboxes").exists()


def test_learning_writes_the_functions_needs_with_where_they_came_from(app: App) -> None:
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes
        with sandboxes(learn=".py-sandboxes"):
            print(len(tools.read("/etc/hostname")) > 0)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
    rules = [
        line
        for line in (app.project / ".py-sandboxes").read_text().splitlines()
        if "# learned:" in line
    ]
    assert any(
        line.startswith("expose-ro=/etc/hostname") and "tools.py:7" in line for line in rules
    )
    assert any(line.startswith("python-import=os") and "tools.py:" in line for line in rules)
    # The framework's own needs (its socket, threads, pickle, imports) are never learned.
    learned = "\n".join(rules)
    for framework in ("threads", "deserialization", "pickle", "asyncio", "socket", "pysandboxes"):
        assert framework not in learned
    assert "learned 2 rule(s)" in result.stderr


def test_the_learned_rules_then_run_the_same_calls_with_no_refusal(app: App) -> None:
    main = """
        import tools
        from pysandboxes import sandboxes
        with sandboxes({learn}):
            print(len(tools.read("/etc/hostname")) > 0)
        """
    learned = app.run(main.format(learn="learn='.py-sandboxes'"), TOOLS)
    assert learned.returncode == 0, learned.stderr
    enforced = app.run(main.format(learn=""), TOOLS)
    assert enforced.returncode == 0, enforced.stderr
    assert enforced.stdout.strip() == "True"
