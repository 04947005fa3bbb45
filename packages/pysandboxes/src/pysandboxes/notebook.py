"""The IPython extension: ``%load_ext pysandboxes`` in a notebook or an IPython session.

- ``%%sandbox [profile]`` runs the cell in a sandboxed child under the rules (the
  ``.py-sandboxes`` found from the current directory): its output and its refusals show
  in the notebook, and the next cells go on. Cells run in the ``sandboxes()`` that
  ``%sandbox_open`` entered for that profile, sharing their variables there; without
  one, the cell gets a child of its own for its run.
- ``%sandbox_open [profile] [key=value ...]`` enters ``sandboxes(profile=...)`` (with
  those rules added) for the next cells: ``@sandbox`` functions of importable modules
  called from any cell run in it. ``%sandbox_close [profile]`` leaves it.

IPython is never imported here: the kernel hands itself to ``load_ipython_extension``.
"""

from __future__ import annotations

from pysandboxes import sandbox, sandboxes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

#: The sandboxes() entered by %sandbox_open, by profile.
_opened: dict[str | None, sandboxes] = {}
#: In the child: each profile's cells share one namespace.
_cells: dict[str, Any] = {"__name__": "__sandboxed_cell__"}


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%sandbox``, ``%sandbox_open`` and ``%sandbox_close``."""
    ipython.register_magic_function(_cell_magic, "cell", "sandbox")
    ipython.register_magic_function(_open, "line", "sandbox_open")
    ipython.register_magic_function(_close, "line", "sandbox_close")


def unload_ipython_extension(ipython: Any) -> None:
    """Leave every sandbox the magics opened."""
    for profile in list(_opened):
        _opened.pop(profile).__exit__(None, None, None)


@sandbox
def run_cell(source: str) -> object:
    """In the child: run a cell's code; a cell that is one expression gives its value."""
    try:
        code = compile(source, "<sandboxed cell>", "eval")
    except SyntaxError:
        exec(compile(source, "<sandboxed cell>", "exec"), _cells)
        return None
    return eval(code, _cells)


def _cell_magic(line: str, cell: str) -> object:
    profile = line.strip() or None
    box = _opened.get(profile)
    if box is not None:
        return _run(box, cell)
    with sandboxes(profile=profile) as temporary:
        return _run(temporary, cell)


def _run(box: sandboxes, cell: str) -> object:
    done, outcome = box.call(__name__, "run_cell", (cell,), {})
    if done:
        return outcome
    _show(outcome)
    return None


def _show(raised: BaseException) -> None:
    """A refusal, or the cell's own exception, shown as the notebook shows an error;
    the next cells run."""
    import sys

    from pysandboxes import sandbox_denials

    denials = sandbox_denials(raised)
    print(f"{type(raised).__name__}: {raised}", file=sys.stderr)
    for denial in denials[1:] if denials and denials[0].endswith(str(raised)) else denials:
        print(f"  refused: {denial}", file=sys.stderr)


def _open(line: str) -> None:
    words = line.split()
    profile = words[0] if words and "=" not in words[0] else None
    rules: dict[str, Any] = {}
    for word in words[1 if profile else 0 :]:
        key, _, value = word.partition("=")
        rules.setdefault(key.replace("-", "_"), []).append(value)
    if profile in _opened:
        print(f"the sandbox {profile or '(default)'} is open already")
        return
    box = sandboxes(profile=profile, **rules)
    box.__enter__()
    _opened[profile] = box


def _close(line: str) -> None:
    profile = line.strip() or None
    box = _opened.pop(profile, None)
    if box is None:
        print(f"no sandbox {profile or '(default)'} is open")
        return
    box.__exit__(None, None, None)
