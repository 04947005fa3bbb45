"""Attack class 7b: strings evaluated under the ``eval-*`` sub-language.

The three states of the program's ``eval``/``exec``/``compile``: refused without any
``eval-*`` line or grant, guarded with one (checked, rewritten, run under budgets), raw
with ``python-api=ALLOW:dynamic-code`` (a configuration error together with ``eval-*``
lines). The standard library's own generated code stays ambient; the standard modules
that run what the program hands them (``timeit``, ``code``, ``runpy``, ``pdb``,
``doctest``) stay refused whatever the ``eval-*`` grants.
"""

from __future__ import annotations

import pytest
from escapelab import Lab, got

EVAL_RULES = ("expose-ro=./data", "eval-syntax=arith, Call", "eval-call=len")
SECRET_READ = "print('GOT', eval(\"open(SECRET_FILE).read()\"))"


def test_eval_is_refused_without_any_eval_rule(lab: Lab) -> None:
    code = lab.probe("print('DONE', eval('2 + 3'))")
    assert got(lab.control(code), "DONE 5")
    lab.refused(code, "RuleApiPermissionError")


def test_guarded_eval_runs_the_declared_sub_language(lab: Lab) -> None:
    lab.rules(*EVAL_RULES)
    code = lab.probe(
        "print('GOT', eval('2 + 3 * len([1, 2])'), eval(compile('7 * 6', 'x', 'eval')))"
    )
    result = lab.run_sandboxed(code)
    assert got(result, "GOT 8 42"), result.stdout + result.stderr


def test_guarded_eval_refuses_a_secret_read_outside_the_sub_language(lab: Lab) -> None:
    code = lab.probe(SECRET_READ)
    assert got(lab.control(code), lab.secret)
    lab.rules(*EVAL_RULES, "python-import=*")
    result = lab.refused(code, "EvalSyntaxRejected")
    assert "add: eval-call=open" in result.stdout
    assert "add: eval-attribute=read" in result.stdout


def test_guarded_eval_hides_the_callers_module_globals(lab: Lab) -> None:
    code = lab.probe("token = 'TOKEN'\nprint('GOT', eval('token'))")
    assert got(lab.control(code), "GOT TOKEN")
    lab.rules(*EVAL_RULES)
    result = lab.run_sandboxed(code)
    assert "REFUSED NameError" in result.stdout, result.stdout + result.stderr


def test_guarded_eval_budget_stops_and_the_program_goes_on(lab: Lab) -> None:
    lab.rules(*EVAL_RULES, "eval-call=sum, range")
    code = lab.probe(
        "import pysandboxes\n"
        "try:\n"
        "    eval('sum(range(10**12))')\n"
        "except pysandboxes.EvalInterrupted as stop:\n"
        "    print('GOT stopped', stop.reason)\n"
        "print('GOT after', eval('1 + 1'))",
        imports="os, sys, pysandboxes",
    )
    result = lab.run_sandboxed(code)
    assert got(result, "GOT stopped eval-max-iterations=1000000"), result.stdout + result.stderr
    assert got(result, "GOT after 2")


def test_standard_library_generated_code_stays_ambient_under_eval_rules(lab: Lab) -> None:
    lab.rules(*EVAL_RULES, "python-import=collections, dataclasses")
    code = lab.probe(
        "import collections, dataclasses\n"
        "P = collections.namedtuple('P', 'x y')\n"
        "@dataclasses.dataclass\nclass D:\n    a: int = 1\n"
        "print('GOT', P(1, 2).x + D().a)",
        imports="collections",
    )
    result = lab.run_sandboxed(code)
    assert got(result, "GOT 2"), result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "call"),
    [
        ("timeit", "timeit.timeit(\"print('DO' + 'NE')\", number=1)"),
        ("code", "code.InteractiveInterpreter().runsource(\"print('DO' + 'NE')\")"),
        ("doctest", "doctest.run_docstring_examples(\">>> print('DO' + 'NE')\", {})"),
        (
            "pdb",
            "pdb.Pdb(stdin=io.StringIO('continue\\n'), stdout=sys.stdout)"
            ".run(\"print('DO' + 'NE')\")",
        ),
    ],
)
def test_string_execution_through_stdlib_runners_stays_refused_with_eval_rules(
    lab: Lab, module: str, call: str
) -> None:
    code = lab.probe(call, imports=f"io, os, sys, {module}")
    assert got(lab.control(code), "DONE")
    lab.rules(*EVAL_RULES, "eval-syntax=import", f"eval-import={module}", "python-import=*")
    lab.refused(code, ("RuleApiPermissionError", "RuleModuleNotFoundError"))


def test_string_execution_through_runpy_stays_refused_with_eval_rules(lab: Lab) -> None:
    code = lab.probe(
        "open(OUT + '/m.py', 'w').write(\"print('DONE')\")\nrunpy.run_path(OUT + '/m.py')",
        imports="os, sys, runpy",
    )
    assert got(lab.control(code), "DONE")
    lab.rules("expose-ro=./data", "expose-rw=./out", *EVAL_RULES[1:], "python-import=*")
    result = lab.run_sandboxed(code)
    assert "DONE" not in result.stdout, result.stdout


def test_raw_grant_with_eval_rules_is_a_configuration_error(lab: Lab) -> None:
    lab.rules(*EVAL_RULES, "python-api=ALLOW:dynamic-code")
    result = lab.run_sandboxed(lab.probe("print('DONE')"))
    assert result.returncode == 255
    assert "is never applied" in result.stderr


def test_raw_grant_alone_runs_any_string(lab: Lab) -> None:
    lab.rules("expose-ro=./data", "python-api=ALLOW:dynamic-code")
    result = lab.run_sandboxed(lab.probe("print('GOT', eval('().__class__.__name__'))"))
    assert got(result, "GOT tuple"), result.stdout + result.stderr


def test_guarded_eval_hands_no_guard_to_the_program(lab: Lab) -> None:
    # The guarded builtins are sealed: no closure, no readable defaults, and what they
    # raise carries no frame of the sandbox (whose locals would hold its machinery).
    lab.rules(*EVAL_RULES)
    code = lab.probe(
        "print('GOT closure', eval.__closure__)\n"
        "try:\n"
        "    eval('open(1)')\n"
        "except SyntaxError as refused:\n"
        "    tb = refused.__traceback__\n"
        "    while tb is not None:\n"
        "        print('GOT frame', tb.tb_frame.f_code.co_filename)\n"
        "        tb = tb.tb_next\n"
        "print('DONE', eval.__kwdefaults__)"
    )
    result = lab.refused(code, "RuleApiPermissionError")
    assert "GOT closure None" in result.stdout
    frames = [line for line in result.stdout.splitlines() if line.startswith("GOT frame")]
    assert frames == ["GOT frame <string>", "GOT frame <pysandboxes sealed call>"]


def test_wide_or_capability_eval_grants_are_announced_at_start(lab: Lab) -> None:
    lab.rules(*EVAL_RULES, "eval-call=s*", "eval-call=getattr", "eval-attribute=format")
    result = lab.run_sandboxed(lab.probe("print('GOT', eval('2 + 2'))"))
    assert got(result, "GOT 4"), result.stderr
    assert "'s*' in 'eval-call=s*' is a wide pattern: it expands to" in result.stderr
    assert "eval-call=getattr adds the capability builtin 'getattr'" in result.stderr
    assert "eval-attribute=format lets evaluated code call str.format" in result.stderr


def test_namespace_modes_decide_what_a_passed_globals_dict_does(lab: Lab) -> None:
    probe = "print('GOT', eval('x + 1', {'x': 1}))"
    lab.rules(*EVAL_RULES)
    assert got(lab.run_sandboxed(lab.probe(probe)), "GOT 2")
    lab.rules(*EVAL_RULES, "eval-namespace=closed")
    assert "REFUSED NameError" in lab.run_sandboxed(lab.probe(probe)).stdout
    lab.rules(*EVAL_RULES, "eval-namespace=caller")
    result = lab.run_sandboxed(lab.probe("x = 41\nprint('GOT', eval('x + 1'))"))
    assert got(result, "GOT 42"), result.stdout + result.stderr
    assert "hands evaluated code the caller's own namespace" in result.stderr


def test_guarded_eval_inside_the_sandbox_takes_the_rule_files_profiles(lab: Lab) -> None:
    # guarded_eval() in a sandboxed program evaluates under the rule file's profiles, and
    # what it holds (reachable through its __globals__) gives the program no other profile.
    imports = "os, sys, pysandboxes"
    call = "import pysandboxes\nprint('GOT', pysandboxes.guarded_eval('2 + len([1])'))"
    lab.rules("expose-ro=./data")
    result = lab.run_sandboxed(lab.probe(call, imports=imports))
    assert "REFUSED ValueError unknown eval profile ''" in result.stdout, result.stdout
    lab.rules(*EVAL_RULES)
    assert got(lab.run_sandboxed(lab.probe(call, imports=imports)), "GOT 3")
    source, names = '"open(SECRET_FILE).read()"', "{'SECRET_FILE': SECRET_FILE}"
    assert got(lab.control(lab.probe(f"print('DONE', eval({source}, {names}))")), lab.secret)
    read = f"import pysandboxes\nprint('DONE', pysandboxes.guarded_eval({source}, names={names}))"
    lab.refused(lab.probe(read, imports=imports), "EvalSyntaxRejected")
    held = (
        "import pysandboxes\n"
        "evaluate = pysandboxes.guarded_eval.__globals__['inforce'].evaluator()\n"
        "print('GOT closure', evaluate.__closure__)\n"
        "print('DONE', evaluate.__kwdefaults__)"
    )
    result = lab.refused(lab.probe(held, imports=imports), "RuleApiPermissionError")
    assert "GOT closure None" in result.stdout
