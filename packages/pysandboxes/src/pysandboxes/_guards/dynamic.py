"""Code made from strings at run time: ``eval``, ``exec``, ``compile``, ``code.replace``.

Refused for the program's own code unless ``python-api`` grants ``dynamic-code``. The
interpreter's own use (the standard library's ``namedtuple`` and ``dataclasses``, the
import system, installed packages, and this framework) is "ambient" and never charged to
the program: the decision is made on the file of the code that asked.
"""

from __future__ import annotations

import sys

from .audit import HOOK_FILENAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import FrameType
    from typing import Any

    from pysandboxes._enforce import Enforcer
    from pysandboxes._policy.judge import ApiJudge

_DYNAMIC = ("builtins.compile", "builtins.eval", "builtins.exec")


class DynamicCodeGuard:
    """Judges the ``compile`` and ``code.__new__`` audit events by who asked."""

    def __init__(
        self,
        api: ApiJudge,
        enforcer: Enforcer,
        ambient_roots: Sequence[str],
        own_files: Sequence[str],
        rule_file: str,
    ) -> None:
        self._allowed = any(api.judge(name).allowed for name in _DYNAMIC)
        self._ambient = tuple(ambient_roots)
        self._own = (*own_files, HOOK_FILENAME)
        self._rule_file = rule_file
        self._enforcer = enforcer
        self._getframe: Callable[[int], FrameType] = sys._getframe  # pyright: ignore[reportPrivateUsage]

    @property
    def events(self) -> dict[str, Callable[[tuple[Any, ...]], None]]:
        """The audit events judged here."""
        if self._allowed:
            return {}
        return {"compile": self._compile, "code.__new__": self._code_new}

    def _caller_file(self) -> str:
        frame: FrameType | None = self._getframe(1)
        own = self._own
        while frame is not None and frame.f_code.co_filename.startswith(own):
            frame = frame.f_back
        return frame.f_code.co_filename if frame is not None else ""

    def _user_code(self) -> bool:
        filename = self._caller_file()
        return not (filename.startswith(("<frozen ", *self._ambient)))

    def _compile(self, args: tuple[Any, ...]) -> None:
        if self._user_code():
            self._refuse("eval(), exec() and compile()", "builtins.compile")

    def _code_new(self, args: tuple[Any, ...]) -> None:
        if self._user_code():
            self._refuse("Building a code object (types.CodeType, code.replace)", "code.__new__")

    def _refuse(self, what: str, qualname: str) -> None:
        self._enforcer.refuse_call(
            qualname,
            "dynamic-code",
            f"{what} of source code by the program is refused by the API guard (category: "
            f"dynamic-code). Add 'python-api=ALLOW:dynamic-code' to {self._rule_file} to "
            "allow it.",
        )
