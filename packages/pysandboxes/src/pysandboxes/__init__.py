"""Py-Sandboxes: run Python, or only some of its functions, under a reviewable rule file.

The public surface is declared once, here; everything else lives in ``_``-prefixed
modules and may change without notice. ``tests/test_public_api.py`` pins this list.
A folder says which side of the wall its code runs on; imports only go down this tree
(``lint-imports`` checks it)::

    _api       the entry points behind this module's names
    _host/     trusted side: load rules, plan, spawn, wait, conclude (learned rules)
    _inside/   sandboxed side: bootstrap, guards, enforcer, recorder, runner, REPL
    _wire/     what crosses between them: the spec sent in, the one decoder of events
    _kernel/   kernel-layer mechanism on a compiled plan: Landlock, seccomp, namespaces
    _policy/   the rules as data: parser, verdicts, the plan and view they compile to
    errors     the exception tree (and _mode, _record, _version: plain helpers)
"""

from pysandboxes._api.report import enforcement_report as enforcement_report
from pysandboxes._mode import is_in_sandbox as is_in_sandbox
from pysandboxes._version import __version__ as __version__
from pysandboxes.errors import ConfigSyntaxError as ConfigSyntaxError
from pysandboxes.errors import OSLayerUnavailable as OSLayerUnavailable
from pysandboxes.errors import RemoteError as RemoteError
from pysandboxes.errors import RuleApiPermissionError as RuleApiPermissionError
from pysandboxes.errors import RuleFileNotFoundError as RuleFileNotFoundError
from pysandboxes.errors import RuleModuleNotFoundError as RuleModuleNotFoundError
from pysandboxes.errors import RulePermissionError as RulePermissionError
from pysandboxes.errors import RuleResultRefusedError as RuleResultRefusedError
from pysandboxes.errors import RuleSocketConnectionRefusedError as RuleSocketConnectionRefusedError
from pysandboxes.errors import SandboxCrashed as SandboxCrashed
from pysandboxes.errors import SandBoxError as SandBoxError
from pysandboxes.errors import SandboxTimeout as SandboxTimeout
from pysandboxes.errors import sandbox_denials as sandbox_denials

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._api.decorator import sandbox as sandbox
    from pysandboxes._api.partial import run as run
    from pysandboxes._api.partial import sandboxes as sandboxes

__all__ = [
    "ConfigSyntaxError",
    "OSLayerUnavailable",
    "RemoteError",
    "RuleApiPermissionError",
    "RuleFileNotFoundError",
    "RuleModuleNotFoundError",
    "RulePermissionError",
    "RuleResultRefusedError",
    "RuleSocketConnectionRefusedError",
    "SandBoxError",
    "SandboxCrashed",
    "SandboxTimeout",
    "__version__",
    "enforcement_report",
    "is_in_sandbox",
    "run",
    "sandbox",
    "sandbox_denials",
    "sandboxes",
]

#: Partial mode's names, imported when first used: the sandboxed interpreter starts
#: without them (and without ``typing``).
_LAZY = {
    "sandbox": "pysandboxes._api.decorator",
    "sandboxes": "pysandboxes._api.partial",
    "run": "pysandboxes._api.partial",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pysandboxes' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
