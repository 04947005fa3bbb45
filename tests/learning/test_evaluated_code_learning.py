"""Learning evaluated code: the constructs used, never a raw grant of eval.

A learning run that sees ``eval`` of the program's strings writes the ``eval-*`` lines of
what the sources used; the next run evaluates the same sources guarded, and a source
using a construct no learned line allows is refused. A ``python-api=ALLOW:dynamic-code``
line would instead let any later string run, ``__subclasses__`` walks included.
"""

from __future__ import annotations

from pathlib import Path

from learnlab import granted

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

APP = """\
import sys
print(eval("2 + 3 * len([1, 2])"), eval("'a,b'.split(',')"))
if len(sys.argv) > 1:
    try:
        print(eval(sys.argv[1]))
    except SyntaxError as refused:
        print("REFUSED", type(refused).__name__)
        print(refused)
"""
HIERARCHY_WALK = "().__class__.__base__.__subclasses__()"


def test_learning_writes_the_eval_lines_used_never_a_raw_dynamic_code_grant(
    sb: Runner, project: Path
) -> None:
    (project / "app.py").write_text(APP)
    first = sb("app.py")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "8 ['a', 'b']\n"
    lines = granted(project / ".py-sandboxes")
    assert "eval-syntax=Attribute, BinOp, Call, Constant, Expression, List, Name" in lines
    assert "eval-call=len" in lines
    assert "eval-attribute=split" in lines
    assert not any("dynamic-code" in line or "builtins." in line for line in lines)

    replay = sb("app.py")
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout == "8 ['a', 'b']\n"

    new_construct = sb("app.py", "[n * 2 for n in (1, 2)]")
    assert new_construct.returncode == 0, new_construct.stderr
    assert "REFUSED EvalSyntaxRejected" in new_construct.stdout
    assert "add: eval-syntax=comprehension" in new_construct.stdout

    walk = sb("app.py", HIERARCHY_WALK)
    assert "REFUSED EvalSyntaxRejected" in walk.stdout
    assert "'__subclasses__' reaches frames or the type hierarchy" in walk.stdout


def test_forged_eval_events_never_widen_the_learned_lines() -> None:
    from pysandboxes._host.learning.evalrules import eval_rules
    from pysandboxes._wire.events import Event

    lines: list[str] = []
    skipped: list[str] = []
    events = [
        Event("eval", "BinOp", "syntax", where="app.py:1"),
        Event("eval", "UnaryOp", "syntax", where="app.py:1"),
        Event("eval", "Num", "syntax", where="app.py:1"),  # deprecated: never written
        Event("eval", "*", "call", where="app.py:1"),  # a pattern: never written
        Event("eval", "gi_frame", "attribute", where="app.py:1"),  # no rule allows it
        Event("eval", "__class__", "attribute", where="app.py:1"),  # a dunder is magic
        Event("eval", "len", "call", where="app.py:2"),
    ]
    eval_rules(lambda _f, _b, line, *_rest: lines.append(line), events, skipped)
    assert lines == ["eval-syntax=arith", "eval-call=len"]
    assert len(skipped) == 4
