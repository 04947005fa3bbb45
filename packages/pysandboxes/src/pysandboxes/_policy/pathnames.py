"""Path names compared as text: no I/O. Callers pass real paths when links matter."""

from __future__ import annotations


def within(path: str, place: str) -> bool:
    """Whether ``path`` is ``place`` or lies inside it (both as written)."""
    return path == place or path.startswith(place.rstrip("/") + "/")
