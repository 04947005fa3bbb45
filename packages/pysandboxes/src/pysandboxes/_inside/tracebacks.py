"""Tracebacks as the user should see them: without the sandbox's own frames.

A refusal is raised inside the guards (the sealed audit hook, a wrapper), so its
traceback ends in frames of this package; an uncaught exception also starts in the
runner's. The program's line is what matters: the frames of the framework are cut at
either end, and left out of the tracebacks the program prints itself (the standard
``traceback`` module, adjusted on import), of a thread's uncaught exception and of the
prompt's errors.

What is installed here holds only standard functions and ``is_own``: never a guard.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import FrameType, TracebackType
    from typing import Any

#: This package's directory, and the start of the file names of the code the guards
#: compile (``<pysandboxes audit hook>``, ``<pysandboxes sealed call>``).
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_COMPILED = "<pysandboxes "


def is_own(filename: str) -> bool:
    """Whether code of ``filename`` is the sandbox's own."""
    return filename.startswith((_OWN_DIR + os.sep, _COMPILED))


def user_traceback(tb: TracebackType | None) -> TracebackType | None:
    """The traceback without this framework's frames, at either end."""
    while tb is not None and is_own(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    head = tb
    while tb is not None and tb.tb_next is not None:
        if is_own(tb.tb_next.tb_frame.f_code.co_filename):
            tb.tb_next = None  # a guard refused here: the program's own line is the last
            break
        tb = tb.tb_next
    return head


def leave_out_own_frames(module: object) -> None:
    """Make the standard ``traceback`` module leave this package's frames out.

    Every summary it makes (``print_exc``, ``format_exc``, ``TracebackException`` with
    its causes, contexts and groups, ``extract_stack``; so ``logging.exception`` and the
    standard console too) goes through ``StackSummary._extract_from_extended_frame_gen``:
    the frames are filtered before ``limit`` counts them, and a guard's locals never reach
    ``capture_locals``. On a CPython without it, tracebacks keep the frames.
    """
    summary: Any = getattr(module, "StackSummary", None)
    method = getattr(summary, "_extract_from_extended_frame_gen", None)
    extract = getattr(method, "__func__", None)
    if extract is None:
        return

    def _extract_from_extended_frame_gen(
        klass: type, frame_gen: Iterator[tuple[FrameType, Any]], **options: Any
    ) -> object:
        kept = ((f, where) for f, where in frame_gen if not is_own(f.f_code.co_filename))
        return extract(klass, kept, **options)

    summary._extract_from_extended_frame_gen = classmethod(_extract_from_extended_frame_gen)


def threads_print_without_own_frames(module: object) -> None:
    """Print a thread's uncaught exception through the standard ``traceback`` module, as
    ``threading``'s own Python version does: the C one CPython uses instead prints every
    frame itself."""
    threading: Any = module
    fallback = threading.excepthook  # where there is no stderr to print to

    def excepthook(args: Any, /) -> None:
        if args.exc_type is SystemExit or sys.stderr is None:
            fallback(args)
            return
        import traceback  # adjusted on import: leaves out this package's frames

        name = args.thread.name if args.thread is not None else threading.get_ident()
        print(f"Exception in thread {name}:", file=sys.stderr, flush=True)
        traceback.print_exception(args.exc_type, args.exc_value, args.exc_traceback)
        sys.stderr.flush()

    excepthook.__doc__ = fallback.__doc__
    threading.excepthook = excepthook


def prompt_excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    """``sys.excepthook`` at the prompt ``-i`` opens after the program (CPython's own,
    whose C display prints every frame): the same, through the ``traceback`` module."""
    import traceback  # adjusted on import: leaves out this package's frames

    traceback.print_exception(kind, value, tb)
