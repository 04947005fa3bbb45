"""Py-Sandboxes: run Python, or only some of its functions, under a reviewable rule file.

The rights live in a ``.py-sandboxes`` file (files, variables, network, imports, calls);
anything it does not allow is refused, by the Python layer with a message naming the
rule to add, and by the kernel (Landlock, namespaces) as the wall.

Complete mode runs a whole program under the rules: ``python-sb app.py`` in place of
``python app.py`` (the ``python-sb`` package). Partial mode runs only some functions::

    from pysandboxes import sandbox, sandboxes

    @sandbox                      # in a module of its own (the child imports it)
    def fetch(url): ...

    with sandboxes():             # a sandboxed child with the rules' rights only
        fetch("https://example.org")

``run(main())`` is ``asyncio.run`` with a sandbox around it; ``is_in_sandbox()`` says
whether this code runs sandboxed; ``sandbox_denials(exc)`` lists the refusals behind an
exception; ``enforcement_report()`` says which layer enforces each rule on this host;
``guarded_eval(source, profile=...)`` evaluates a string under an ``eval-*`` profile.
Every refusal is also the built-in exception it stands for (``FileNotFoundError``...)
and a ``SandBoxError``. See docs/usage.md, docs/configuration.md, docs/learning.md.
"""

# For contributors: the public surface is declared once, here (tests/test_public_api.py
# pins it); everything else lives in _-prefixed modules. A folder says which side of the
# wall its code runs on; imports only go down this tree (lint-imports checks it):
#   _api       the entry points behind this module's names
#   _host/     trusted side: load rules, plan, spawn, wait, conclude (learned rules,
#              the decision log and its replay)
#   _inside/   sandboxed side: bootstrap, guards, enforcer, recorder, decisions, runner, REPL
#   _wire/     what crosses between them: the spec sent in, the one decoder of replies
#   _kernel/   kernel-layer mechanism on a compiled plan: Landlock, seccomp, namespaces
#   _policy/   the rules as data: parser, verdicts, the plan and view they compile to
#   errors     the exception tree (and _mode, _record, _version: plain helpers)

from pysandboxes._mode import is_in_sandbox as is_in_sandbox
from pysandboxes._version import __version__ as __version__
from pysandboxes.errors import ConfigRefusedError as ConfigRefusedError
from pysandboxes.errors import ConfigSyntaxError as ConfigSyntaxError
from pysandboxes.errors import EvalInterrupted as EvalInterrupted
from pysandboxes.errors import EvalSyntaxRejected as EvalSyntaxRejected
from pysandboxes.errors import OSLayerUnavailable as OSLayerUnavailable
from pysandboxes.errors import RemoteError as RemoteError
from pysandboxes.errors import RuleApiPermissionError as RuleApiPermissionError
from pysandboxes.errors import RuleEvalPermissionError as RuleEvalPermissionError
from pysandboxes.errors import RuleFileNotFoundError as RuleFileNotFoundError
from pysandboxes.errors import RuleModuleNotFoundError as RuleModuleNotFoundError
from pysandboxes.errors import RulePermissionError as RulePermissionError
from pysandboxes.errors import RuleResultRefusedError as RuleResultRefusedError
from pysandboxes.errors import RuleSocketConnectionRefusedError as RuleSocketConnectionRefusedError
from pysandboxes.errors import SandboxCrashed as SandboxCrashed
from pysandboxes.errors import SandBoxError as SandBoxError
from pysandboxes.errors import SandboxTimeout as SandboxTimeout
from pysandboxes.errors import sandbox_denials as sandbox_denials

# The entry points are imported when first used: python-sb's own start (which imports the
# package for its private modules) does not pay for them. A sandboxed interpreter binds
# them all before its guards are up (the boot code, _wire.spec.BOOT): there the program may
# not import the sandbox's private modules.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._api.decorator import sandbox as sandbox
    from pysandboxes._api.evaluation import guarded_eval as guarded_eval
    from pysandboxes._api.partial import run as run
    from pysandboxes._api.partial import sandboxes as sandboxes
    from pysandboxes._api.report import enforcement_report as enforcement_report
    from pysandboxes._policy.prompts import Decision as Decision
    from pysandboxes._policy.prompts import PermissionRequest as PermissionRequest

_ENTRY_POINTS = {
    "Decision": "pysandboxes._policy.prompts",
    "PermissionRequest": "pysandboxes._policy.prompts",
    "enforcement_report": "pysandboxes._api.report",
    "guarded_eval": "pysandboxes._api.evaluation",
    "run": "pysandboxes._api.partial",
    "sandbox": "pysandboxes._api.decorator",
    "sandboxes": "pysandboxes._api.partial",
}


def __getattr__(name: str) -> object:
    """Import an entry point when first asked for (PEP 562), and keep it bound."""
    where = _ENTRY_POINTS.get(name)
    if where is None:
        raise AttributeError(f"module 'pysandboxes' has no attribute {name!r}")
    value = getattr(__import__(where, fromlist=[name]), name)
    globals()[name] = value
    return value


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext pysandboxes``: the ``%%sandbox`` magics (see pysandboxes.notebook)."""
    # By name: the integrations sit above this module, not below it (lint-imports).
    notebook = __import__("pysandboxes.notebook", fromlist=["load_ipython_extension"])
    notebook.load_ipython_extension(ipython)


__all__ = [
    "ConfigRefusedError",
    "ConfigSyntaxError",
    "Decision",
    "EvalInterrupted",
    "EvalSyntaxRejected",
    "OSLayerUnavailable",
    "PermissionRequest",
    "RemoteError",
    "RuleApiPermissionError",
    "RuleEvalPermissionError",
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
    "guarded_eval",
    "is_in_sandbox",
    "run",
    "sandbox",
    "sandbox_denials",
    "sandboxes",
]
