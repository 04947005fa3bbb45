"""The result of a sandboxed call, as the rules let the caller accept it.

``remote-result-mode=values`` (the default; also spelled ``data-only``): values only, the
classes of ``_wire.values``. ``remote-result-mode=objects``: also instances of the
application's own classes, an allowlist: classes of modules the application has
imported already, whose files lie outside the standard library and the installed
packages. Nothing is imported to rebuild them and no standard-library tool qualifies,
so a result cannot name a function that acts in the caller.
"""

from __future__ import annotations

import os
import sys
import sysconfig

from pysandboxes.errors import RuleResultRefusedError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pysandboxes._policy.model import Policy


def decode_result(data: bytes, policy: Policy | None) -> Any:
    """Decode a result; raise ``RuleResultRefusedError`` naming what was refused and the rule."""
    from pysandboxes._wire.codec import RefusedValue, decode_value

    setting = policy.remote_result_mode if policy is not None else None
    objects = setting is not None and setting.value == "objects"
    try:
        return decode_value(data, objects=_own_class if objects else None)
    except RefusedValue as exc:
        what = str(exc)
        if objects or "." not in what or " " in what:
            raise RuleResultRefusedError(
                f"the sandboxed function's result was refused: {what}"
            ) from None
        raise RuleResultRefusedError(
            f"the sandboxed function returned a {what}, which is not a value "
            "(remote-result-mode=values): return plain data, or add "
            "remote-result-mode=objects to the rules to rebuild the application's own classes"
        ) from None


def _library_trees() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    trees = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return tuple(os.path.realpath(t) + os.sep for t in (*trees, own) if t)


def _own_class(module: str, name: str) -> type | None:
    """A class of the application's own, already imported; never a library's."""
    loaded = sys.modules.get(module)
    source = getattr(loaded, "__file__", None)
    if loaded is None or not isinstance(source, str):
        return None
    if os.path.realpath(source).startswith(_library_trees()):
        return None
    found: Any = loaded
    for part in name.split("."):
        found = found.__dict__.get(part) if hasattr(found, "__dict__") else None
        if not isinstance(found, type):
            return None
    kind: type[object] = found
    if issubclass(kind, BaseException):
        return None
    return kind
