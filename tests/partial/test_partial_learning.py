"""Partial mode learns only when asked, and learns what the functions did, not itself."""

from __future__ import annotations

from pathlib import Path

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


def test_the_library_speaks_as_itself_and_advises_include_only_when_it_applies(
    app: App,
) -> None:
    main = """
        import tools
        from pysandboxes import sandboxes
        with sandboxes({config}learn={learn!r}):
            tools.read("/etc/hostname")
        """
    alone = app.run(main.format(config="", learn=".py-sandboxes"), TOOLS)
    assert alone.returncode == 0, alone.stderr
    assert "pysandboxes learned 2 rule(s)" in alone.stderr
    assert "python-sb" not in alone.stderr
    assert "include" not in alone.stderr  # the only rule file: the next run finds it
    (app.project / "main.py-sandboxes").write_text("python-import=os\n")
    beside = app.run(
        main.format(config="sandboxes_config='main.py-sandboxes', ", learn="learned.rules"),
        TOOLS,
    )
    assert beside.returncode == 0, beside.stderr
    assert 'add include "learned.rules" to your rule file' in beside.stderr


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


def test_learning_writes_objects_mode_and_the_classes_results_held(
    app: App, tmp_path: Path
) -> None:
    library = tmp_path / "library"  # outside the application's directories: not its own
    library.mkdir()
    (library / "models.py").write_text(
        "class Row:\n    def __init__(self, n):\n        self.n = n\n"
    )
    main = """
        import sys
        sys.path.insert(0, {library!r})
        import models, tools
        from pysandboxes import sandboxes
        with sandboxes({learn}):
            point, row = tools.objects()
            print(type(point).__name__, point.x, type(row).__name__, row.n)
        """
    objects_tools = """
        import sys
        from pysandboxes import sandbox

        class Point:
            def __init__(self, x):
                self.x = x

        @sandbox
        def objects():
            sys.path.insert(0, LIBRARY)
            import models
            return Point(1), models.Row(2)
        """.replace("LIBRARY", repr(str(library)))
    learned = app.run(
        main.format(learn="learn='.py-sandboxes'", library=str(library)), objects_tools
    )
    assert learned.returncode == 0, learned.stderr
    assert learned.stdout.strip() == "Point 1 Row 2"
    rules = (app.project / ".py-sandboxes").read_text()
    written = [line.split("#")[0].strip() for line in rules.splitlines() if "# learned:" in line]
    assert "remote-result-mode=objects" in written
    assert "remote-result-class=models.Row" in written
    assert not any("tools.Point" in line for line in written)  # the application's own
    assert any("returned by tools.objects" in line for line in rules.splitlines())
    # The directory itself, for the import system to list (learning grants the file).
    directory = f"expose_ro={str(library)!r}"
    enforced = app.run(main.format(learn=directory, library=str(library)), objects_tools)
    assert enforced.returncode == 0, enforced.stderr
    assert enforced.stdout.strip() == "Point 1 Row 2"
