"""The registry of sensitive functions: its shape, its content, and that its names are real."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from types import MappingProxyType

import pytest

from pysandboxes._policy import registry

# Names that exist only on Windows: never resolvable on the Linux machines the suite runs on.
_WINDOWS_ONLY = frozenset(
    {
        "_ctypes.LoadLibrary",
        "_winapi.CreateProcess",
        "ctypes.OleDLL",
        "ctypes.WinDLL",
        "nt.abort",
        "nt.execv",
        "nt.execve",
        "nt.kill",
        "nt.spawnv",
        "nt.spawnve",
        "nt.startfile",
        "nt.system",
        "nt.umask",
        "os.startfile",
    }
)

# The version-specific names, each with the first version that has it...
_SINCE: dict[str, tuple[int, int]] = {
    **dict.fromkeys(
        (
            "os.setns",
            "os.unshare",
            "posix.setns",
            "posix.unshare",
            "sys._setprofileallthreads",
            "sys._settraceallthreads",
            "sys.monitoring.free_tool_id",
            "sys.monitoring.register_callback",
            "sys.monitoring.set_events",
            "sys.monitoring.set_local_events",
            "sys.monitoring.use_tool_id",
            "threading.setprofile_all_threads",
            "threading.settrace_all_threads",
        ),
        (3, 12),
    ),
    **dict.fromkeys(
        (
            "_interpreters.call",
            "_interpreters.create",
            "_interpreters.exec",
            "_interpreters.run_func",
            "_interpreters.run_string",
            "_thread.start_joinable_thread",
            "threading._start_joinable_thread",
        ),
        (3, 13),
    ),
    **dict.fromkeys(
        (
            "_remote_debugging.RemoteUnwinder",
            "concurrent.futures.InterpreterPoolExecutor",
            "concurrent.interpreters.create",
            "sys.monitoring.clear_tool_id",
            "sys.remote_exec",
        ),
        (3, 14),
    ),
}
# ...or the first version that no longer has it.
_UNTIL: dict[str, tuple[int, int]] = dict.fromkeys(
    ("_xxsubinterpreters.create", "_xxsubinterpreters.run_string", "threading._start_new_thread"),
    (3, 13),
)

# The entries the issue names, with the category each must have.
_NAMED_BY_THE_ISSUE = [
    ("ctypes.pythonapi", "native"),
    ("os.posix_spawnp", "process-exec"),
    ("_posixsubprocess.fork_exec", "process-exec"),
    ("sys.remote_exec", "process-control"),
    ("_interpreters.create", "process-exec"),
    ("_xxsubinterpreters.create", "process-exec"),
    ("concurrent.interpreters.create", "process-exec"),
    ("pickle.loads", "deserialization"),
    ("builtins.eval", "dynamic-code"),
    ("gc.get_referrers", "introspection"),
]


def test_every_category_is_known_and_not_empty() -> None:
    assert set(registry.SENSITIVE_FUNCTIONS.values()) == set(registry.CATEGORIES)
    for category in registry.CATEGORIES:
        assert registry.CATEGORY_MEMBERS[category], f"{category} has no member"


def test_the_dangerous_categories_are_the_five_learning_marks() -> None:
    marked = {"process-exec", "privileges", "native", "dynamic-code", "deserialization"}
    assert marked == registry.DANGEROUS_CATEGORIES
    assert marked <= set(registry.CATEGORIES)


def test_every_name_is_a_dotted_qualified_name() -> None:
    for qualname in registry.SENSITIVE_FUNCTIONS:
        parts = qualname.split(".")
        assert len(parts) >= 2, f"{qualname} has no dot: it would read as a category"
        assert all(part.isidentifier() for part in parts), qualname


def test_category_members_match_sensitive_functions() -> None:
    assert set(registry.CATEGORY_MEMBERS) == set(registry.CATEGORIES)
    rebuilt = {
        qualname: category
        for category, members in registry.CATEGORY_MEMBERS.items()
        for qualname in members
    }
    assert rebuilt == dict(registry.SENSITIVE_FUNCTIONS)
    assert sum(map(len, registry.CATEGORY_MEMBERS.values())) == len(registry.SENSITIVE_FUNCTIONS)


def test_the_registry_is_read_only() -> None:
    assert isinstance(registry.SENSITIVE_FUNCTIONS, MappingProxyType)
    assert isinstance(registry.CATEGORY_MEMBERS, MappingProxyType)


def test_the_registry_covers_at_least_the_existing_implementation() -> None:
    assert len(registry.SENSITIVE_FUNCTIONS) >= 140


@pytest.mark.parametrize(("qualname", "category"), _NAMED_BY_THE_ISSUE)
def test_an_entry_named_by_the_issue_has_its_category(qualname: str, category: str) -> None:
    assert registry.category_of(qualname) == category


def test_category_of_an_unregistered_name_is_none() -> None:
    assert registry.category_of("os.getcwd") is None
    assert registry.category_of("process-exec") is None


def test_resolve_finds_the_object_on_this_interpreter() -> None:
    import ctypes

    assert registry.resolve("os.system") is vars(os)["system"]  # os.system is soft-deprecated
    assert registry.resolve("subprocess.Popen") is subprocess.Popen
    assert registry.resolve("threading.Thread.start") is threading.Thread.start
    assert registry.resolve("ctypes.pythonapi") is ctypes.pythonapi


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring appeared in 3.12")
def test_resolve_reads_attributes_of_a_namespace_that_is_not_a_module() -> None:
    if sys.version_info >= (3, 12):  # for the type checker, which reads this file as 3.11
        assert registry.resolve("sys.monitoring.use_tool_id") is sys.monitoring.use_tool_id


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="sys.remote_exec exists from 3.14")
def test_resolve_is_none_for_a_name_of_a_later_version() -> None:
    assert registry.resolve("sys.remote_exec") is None


@pytest.mark.parametrize(
    "qualname",
    ["os.nope", "no_such_module_here.run", "threading.Thread.nope", "os.", ".os", "..", ""],
)
def test_resolve_is_none_for_a_made_up_name(qualname: str) -> None:
    assert registry.resolve(qualname) is None


@pytest.mark.skipif(sys.platform != "linux", reason="the registry is checked on Linux")
def test_every_entry_of_this_version_resolves() -> None:
    """A typo in a name shows here: every name must exist where the tables say it does."""
    version = sys.version_info[:2]
    missing = [
        qualname
        for qualname in registry.SENSITIVE_FUNCTIONS
        if qualname not in _WINDOWS_ONLY
        and version >= _SINCE.get(qualname, (0, 0))
        and version < _UNTIL.get(qualname, (99, 0))
        and registry.resolve(qualname) is None
    ]
    assert not missing, f"registered but absent on {sys.version}: {missing}"


def test_the_version_tables_name_registered_entries() -> None:
    listed = _WINDOWS_ONLY | set(_SINCE) | set(_UNTIL)
    assert listed <= set(registry.SENSITIVE_FUNCTIONS), listed - set(registry.SENSITIVE_FUNCTIONS)
