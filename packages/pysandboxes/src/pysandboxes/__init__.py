"""Py-Sandboxes: run Python, or only some of its functions, under a reviewable rule file.

The public surface is declared once, here; everything else lives in ``_``-prefixed
modules and may change without notice. ``tests/test_public_api.py`` pins this list.
"""

from ._api import enforcement_report as enforcement_report
from ._mode import is_in_sandbox as is_in_sandbox
from ._version import __version__ as __version__
from .errors import ConfigSyntaxError as ConfigSyntaxError
from .errors import OSLayerUnavailable as OSLayerUnavailable
from .errors import RuleApiPermissionError as RuleApiPermissionError
from .errors import RuleFileNotFoundError as RuleFileNotFoundError
from .errors import RuleModuleNotFoundError as RuleModuleNotFoundError
from .errors import RulePermissionError as RulePermissionError
from .errors import RuleSocketConnectionRefusedError as RuleSocketConnectionRefusedError
from .errors import SandBoxError as SandBoxError
from .errors import sandbox_denials as sandbox_denials

__all__ = [
    "ConfigSyntaxError",
    "OSLayerUnavailable",
    "RuleApiPermissionError",
    "RuleFileNotFoundError",
    "RuleModuleNotFoundError",
    "RulePermissionError",
    "RuleSocketConnectionRefusedError",
    "SandBoxError",
    "__version__",
    "enforcement_report",
    "is_in_sandbox",
    "sandbox_denials",
]
