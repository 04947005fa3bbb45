"""A directory whose real path is a few bytes short of ``PATH_MAX``, reached through a
short link: the shape of the escapes where a guard's ``lstat`` of the long real path
failed with ``ENAMETOOLONG`` and took it for "missing". Shared by the suites."""

from __future__ import annotations

import os
from pathlib import Path


def beyond_path_max(project: Path, short: str, link: str, target: str, length: int) -> None:
    """Make ``project/<dirs>`` of real length ``length``, a link ``link -> target`` in its
    deepest directory, and ``project/short`` leading to that directory."""
    fd = os.open(project, os.O_RDONLY)
    reached = len(str(project))
    parts: list[str] = []
    while reached < length:
        part = "d" * min(200, length - reached - 1)
        os.mkdir(part, dir_fd=fd)
        inner = os.open(part, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd, reached = inner, reached + 1 + len(part)
        parts.append(part)
    os.symlink(target, link, dir_fd=fd)
    os.close(fd)
    os.symlink("/".join(parts), project / short)
