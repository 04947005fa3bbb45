"""The command that starts the sandboxed interpreter under a namespace provider.

The one place where the trusted side's spawn differs per provider: ``landlock``,
``subprocess`` and ``none`` start the interpreter directly (Landlock is applied by the
interpreter on itself); ``bwrap`` and ``unshare`` put their program in front of it. The
plan of the mount view is computed here, on the trusted side, with the same functions
the sandboxed interpreter uses for its own.
"""

from __future__ import annotations

import os

from pysandboxes._wire.spec import WRAPPING

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from pysandboxes._wire.spec import LaunchSpec


def command_for(
    spec: LaunchSpec, child_env: Mapping[str, str], argv: list[str], cwd: str | None = None
) -> tuple[str, list[str], tuple[int, ...]]:
    """The executable and argv that start ``argv`` (the interpreter) for ``spec.provider``,
    and the descriptors the command inherits, which the caller closes once it started.

    ``child_env`` is the environment the command will be started with: the provider's
    program gets exactly the sandbox's variables, and hands them down unchanged.
    """
    del child_env  # started with it; nothing of it goes on a command line (world-readable)
    if spec.provider not in WRAPPING:
        return argv[0], argv, ()
    from pysandboxes._policy.view import plan_for

    cwd = cwd or os.getcwd()
    if spec.provider == "unshare":
        from pysandboxes._kernel import unshare

        plan = plan_for(spec.policy, spec.implicit, spec.tempdir, [], [])  # only the network
        return (*unshare.command(plan, argv), ())
    from pysandboxes._kernel import bwrap
    from pysandboxes._policy.view import (
        interpreter_libraries,
        interpreter_roots,
        launcher_search_path,
        module_files,
    )

    search = launcher_search_path()
    program = [argv[0], *interpreter_libraries()]  # argv[0] as written: a venv's link
    if spec.program.kind == "script":
        program.append(os.path.realpath(os.path.join(cwd, spec.program.target)))
    elif spec.program.kind == "module":
        program += module_files(spec.program.target, [cwd, *search])
    if spec.serve is not None:  # partial mode: the modules of the @sandbox functions
        program += spec.serve.files
    roots = interpreter_roots(search)
    plan = plan_for(spec.policy, spec.implicit, spec.tempdir, roots, program)
    options = {o.option: o.value for o in spec.policy.provider_options if o.provider == "bwrap"}
    executable, argv, options_fd = bwrap.command(plan, cwd, argv, options)
    return executable, argv, (options_fd,)
