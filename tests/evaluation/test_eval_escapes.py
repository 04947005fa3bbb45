"""Escapes through evaluated code: refused whatever the grants.

Each probe first runs under plain ``eval`` (the control: it reaches what it is after),
then under ``guarded_eval`` with a profile that grants everything the probe's syntax
needs: the escape itself is still refused, with no rule line that would allow it.
"""

from __future__ import annotations

import builtins
import sys

import pytest

from pysandboxes import EvalSyntaxRejected, RuleEvalPermissionError, guarded_eval

#: Every syntax group and every ordinary name granted: only the escapes are left.
WIDE = "\n".join(
    [
        "eval-syntax=arith, compare, conditional, loop, comprehension, assign, func",
        "eval-syntax=exception, subscript, fstring, yield, Call, Attribute, Expr",
        "eval-call=getattr, type, next, iter, str, list, len, dict",
        "eval-attribute=str-methods, list-methods, dict-methods, format, format_map",
        "eval-magic=__class__, __globals__, __dict__, __getitem__, __init__",
    ]
)


def _refused(source: str, mode: str = "eval") -> str:
    with pytest.raises((EvalSyntaxRejected, RuleEvalPermissionError)) as caught:
        guarded_eval(source, mode=mode, rules=WIDE)
    return str(caught.value)


def test_generator_frame_capture_reaches_the_callers_globals_is_refused() -> None:
    source = "(x for x in [1]).gi_frame.f_back"
    control = eval("(x for x in [1]).gi_frame.f_globals", {"secret": 42})
    assert control["secret"] == 42
    message = _refused(source)
    assert "'gi_frame' reaches frames" in message
    assert "no rule allows it" in message
    assert "'f_back' reaches frames" in message


@pytest.mark.parametrize("attribute", ["tb_frame", "cr_frame", "f_globals", "f_back", "gi_code"])
def test_frame_capture_attributes_are_refused_even_when_granted(attribute: str) -> None:
    rules = WIDE + f"\neval-attribute={attribute}"
    with pytest.raises(EvalSyntaxRejected, match="reaches frames"):
        guarded_eval(f"x.{attribute}", names={"x": 1}, rules=rules)


def test_frame_capture_through_a_granted_getattr_is_refused() -> None:
    assert eval("getattr(g, 'gi_frame')", {"g": (x for x in [1])}) is not None
    with pytest.raises(RuleEvalPermissionError, match="no rule allows it"):
        guarded_eval("getattr(g, 'gi' + '_frame')", names={"g": (x for x in [1])}, rules=WIDE)


def test_frame_capture_through_getattr_handed_to_map_is_refused() -> None:
    # map calls getattr from C, past the call checks: it is handed over wrapped.
    assert eval("list(map(getattr, [g], ['gi_frame']))", {"g": (x for x in [1])})[0] is not None
    with pytest.raises(RuleEvalPermissionError, match="no rule allows it"):
        guarded_eval(
            "list(map(getattr, [g], ['gi_frame']))",
            names={"g": (x for x in [1])},
            rules=WIDE + "\neval-call=map",
        )


@pytest.mark.parametrize(
    "source",
    ["list(map('{0.__class__}'.format, [1]))", "str.format('{0.__class__}', 1)"],
)
def test_format_field_traversal_through_map_or_the_unbound_method_is_refused(
    source: str,
) -> None:
    assert eval(source) in (["<class 'int'>"], "<class 'int'>")
    with pytest.raises(RuleEvalPermissionError, match="format field"):
        guarded_eval(source, rules=WIDE + "\neval-call=map")


def test_format_field_traversal_reaches_globals_is_refused() -> None:
    source = "'{0.__init__.__globals__}'.format(obj)"

    class Obj:
        def __init__(self) -> None:
            pass

    assert "sys" in eval(source, {"obj": Obj()}) or "__name__" in eval(source, {"obj": Obj()})
    with pytest.raises(RuleEvalPermissionError, match="format field"):
        guarded_eval(source, names={"obj": Obj()}, rules=WIDE)
    with pytest.raises(RuleEvalPermissionError, match="format field"):
        guarded_eval("'{0[x]}'.format_map(d)", names={"d": {"x": 1}}, rules=WIDE)


@pytest.mark.parametrize("walk", ["__subclasses__()", "__bases__", "__mro__", "mro()"])
def test_type_hierarchy_walks_are_refused_even_with_magic_granted(walk: str) -> None:
    assert eval(f"().__class__.__base__.{walk}") is not None or walk == "__bases__"
    rules = WIDE + "\neval-magic=*"
    with pytest.raises(EvalSyntaxRejected, match="reaches frames or the type hierarchy"):
        guarded_eval(f"().__class__.{walk}", rules=rules)


def test_builtins_injection_through_the_callers_globals_is_refused() -> None:
    # Plain eval adds the real builtins to a namespace without them: open() is there.
    namespace: dict[str, object] = {}
    assert eval("open", namespace) is builtins.open
    with pytest.raises(EvalSyntaxRejected, match="call of 'open' is not allowed"):
        guarded_eval("open('/etc/passwd')", names={"__builtins__": builtins}, rules=WIDE)
    rules = WIDE + "\neval-magic=__builtins__"
    seen = guarded_eval("__builtins__", names={"__builtins__": builtins}, rules=rules)
    assert seen is not builtins
    assert "open" not in seen


def test_names_reserved_for_the_guard_cannot_be_named_or_supplied() -> None:
    message = _refused("__sb_call(print, 1)")
    assert "reserved for the sandbox" in message
    with pytest.raises(ValueError, match="reserved"):
        guarded_eval("1", names={"__sb_call": print}, rules=WIDE)


@pytest.mark.parametrize(
    ("module", "call"),
    [
        ("timeit", "timeit.timeit('1', number=1)"),
        ("code", "code.InteractiveInterpreter().runsource('1')"),
        ("runpy", "runpy.run_path('x')"),
        ("pdb", "pdb.run('1')"),
        ("doctest", "doctest.run_docstring_examples('>>> 1', {})"),
    ],
)
def test_string_execution_through_stdlib_runners_needs_an_import_no_profile_gives(
    module: str, call: str
) -> None:
    assert module in sys.stdlib_module_names
    rules = WIDE + "\neval-syntax=import"
    with pytest.raises(EvalSyntaxRejected, match=f"import of '{module}' is not allowed"):
        guarded_eval(f"import {module}\n{call}", mode="exec", rules=rules)


def test_every_violation_is_reported_at_once_with_place_caret_and_rule_line() -> None:
    with pytest.raises(EvalSyntaxRejected) as caught:
        source = "x.upper() + len(y)\n[z for z in y]\n[len][0](y)"
        guarded_eval(source, mode="exec", rules="eval-syntax=arith")
    text = str(caught.value)
    print(text)
    assert text.startswith("5 rules violated in <eval:default>")
    # A call through an expression needs the node itself; of a name, the name only.
    assert "line 3, col 0: syntax 'Call' is not allowed" in text
    assert "line 3, col 0: syntax 'Subscript' is not allowed" in text
    assert "add: eval-syntax=Call" in text
    assert "add: eval-attribute=upper" in text
    assert "add: eval-call=len" in text
    assert "line 2, col 0: syntax 'ListComp' is not allowed" in text
    assert "add: eval-syntax=comprehension" in text
    assert "      x.upper() + len(y)\n      ^^^^^^^" in text
    assert caught.value.lineno == 1
    assert isinstance(caught.value, SyntaxError)
