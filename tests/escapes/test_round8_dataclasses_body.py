"""Round eight, dynamic code: ``dataclasses._create_fn`` called by the program.

The dynamic-code guard let ``dataclasses._create_fn`` compile any source starting with
``def __create_fn__(``, the shape it generates. But the program may call it itself, with
any body: ``dataclasses._create_fn('f', [], [body], globals={})`` ran the string. Now
its source is ambient only when ``dataclasses`` itself called it (field names pasted
into the generated code stay a known limit, see docs/security.md).

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

from escapelab import Lab, got

RULES = ("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")


def test_cant_hand_dataclasses_a_body(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe(
        """
        import dataclasses
        dataclasses._create_fn('f', [], ["print('RAN')"], globals={})()
        print('DONE')
        """
    )
    assert "RAN" in lab.control(code).stdout
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert "RAN" not in result.stdout, output
    assert "RuleApiPermissionError" in output, output


def test_dataclasses_still_work(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe(
        """
        import dataclasses
        @dataclasses.dataclass(frozen=True, order=True)
        class P:
            a: int
            b: str = 'x'
        made = dataclasses.make_dataclass('D', [('x', int)])
        print('MADE', P(1), P(1) < P(2), made(3))
        """
    )
    assert got(lab.run_sandboxed(code), "MADE P(a=1, b='x') True D(x=3)")
