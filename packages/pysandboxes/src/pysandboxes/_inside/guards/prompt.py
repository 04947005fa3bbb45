"""The ``-i`` prompt's input: what CPython's own prompt compiles was typed only if it
came from the standard input the sandbox started with.

The prompt reads fd 0 and compiles each line with no frame and no source object, which
the dynamic-code guard takes for the person at the prompt. A program that ``dup2``s a
pipe holding its own text onto fd 0 would have the prompt run that text as typed: the
guard asks ``fed()`` first, and such a line is the program's source code.
"""

from __future__ import annotations

import posix

from pysandboxes.errors import RuleApiPermissionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._inside.enforce import Enforcer


class PromptInput:
    """What fd 0 was when the sandbox started (device and inode), to compare with now."""

    def __init__(self) -> None:
        self._fstat = posix.fstat  # bound now: the program may replace os.fstat
        self._started = self._now()

    def _now(self) -> tuple[int, int] | None:
        try:
            info = self._fstat(0)
        except OSError:
            return None  # closed: the prompt reads nothing
        return info.st_dev, info.st_ino

    def fed(self) -> bool:
        """Whether fd 0 is no longer what the sandbox started with."""
        return self._now() != self._started

    def refuse(self, enforcer: Enforcer, rule_file: str) -> None:
        """Refuse a line read from a replaced fd 0: the prompt ends, with the reason.

        The prompt asks before it reads: a refused line stays in the pipe, and the
        prompt would ask again for ever. It stops instead (learning records it first)."""
        try:
            enforcer.refuse_call(
                "builtins.compile",
                "dynamic-code",
                "The -i prompt's input is refused: fd 0 is no longer the descriptor the "
                "sandbox started with (the program replaced it), so its lines are the "
                "program's source code, which the API guard refuses (category: "
                f"dynamic-code). Add 'python-api=ALLOW:dynamic-code' to {rule_file} to "
                "allow it.",
            )
        except RuleApiPermissionError as refusal:
            raise SystemExit(f"{type(refusal).__name__}: {refusal}") from None
