"""What ``guarded_eval`` calls inside a sandbox: the evaluator the bootstrap put in force
over the rule file's ``eval-*`` profiles.

``pysandboxes`` (and so ``guarded_eval``) is imported by the boot code before the
bootstrap; ``guarded_eval`` holds this module from then on. The bootstrap fills it
(``patch.install``), then takes every module of the sandbox out of ``sys.modules``: a later
import would be refused. What is kept is a sealed function (``guards.audit``): the program
can reach this module through ``guarded_eval.__globals__``, and then only call it, as
``guarded_eval`` does; the profiles stay in its hidden defaults, out of the program's
reach. Nothing here imports the runner: ``import pysandboxes`` stays cheap.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_evaluate: list[Callable[..., object]] = []


def put_in_force(evaluate: Callable[..., object]) -> None:
    """Called once by the bootstrap, before any code of the program runs: ``evaluate``
    takes a profile's name, the source, the mode and the names."""
    _evaluate[:] = [evaluate]


def evaluator() -> Callable[..., object] | None:
    """The evaluator in force (``None``: outside a sandbox, or no ``eval-*`` line)."""
    return _evaluate[0] if _evaluate else None
