"""The public surface is declared once, in ``pysandboxes.__all__``, and pinned here."""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

import pytest

import pysandboxes
from pysandboxes import errors

PUBLIC = [
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


def test_all_is_pinned_and_sorted() -> None:
    assert pysandboxes.__all__ == PUBLIC
    assert sorted(pysandboxes.__all__) == pysandboxes.__all__


def test_every_public_name_exists_and_lives_in_a_public_module() -> None:
    for name in pysandboxes.__all__:
        value = getattr(pysandboxes, name)
        module = getattr(value, "__module__", "pysandboxes")
        assert not any(part.startswith("_") for part in module.split(".")[1:]) or callable(value), (
            f"{name} is defined in private module {module}"
        )


def test_exceptions_have_a_public_stable_module() -> None:
    # Exceptions cross the RPC by pickle: their import path is part of the wire format.
    for name in pysandboxes.__all__:
        value = getattr(pysandboxes, name)
        if isinstance(value, type) and issubclass(value, BaseException):
            assert value.__module__ == "pysandboxes.errors"


def test_tested_against_installed_wheel_not_source_tree() -> None:
    if "PYSANDBOXES_WHEELS_DIR" not in os.environ:
        pytest.skip("not run by scripts/test: an editable install is under test")
    installed = Path(pysandboxes.__file__).resolve()
    assert "site-packages" in installed.parts, installed
    assert not any(Path(p).name == "src" for p in sys.path if p)


REFUSALS = [
    errors.RuleFileNotFoundError("Access to '/x' must be accepted by a rule.", path="/x"),
    errors.RulePermissionError("Cannot write to '/d/f'.", path="/d/f", rule="expose-ro=/d"),
    errors.RuleSocketConnectionRefusedError("refused", address="127.0.0.1:9"),
    errors.RuleModuleNotFoundError("Module named 'csv' is not allowed by a rule", name="csv"),
    errors.RuleApiPermissionError("os.system() is denied", qualname="os.system", category="x"),
    errors.ConfigSyntaxError([errors.ConfigIssue(".py-sandboxes", 3, "bad")]),
    errors.ConfigRefusedError([errors.ConfigIssue(".py-sandboxes", 2, "writes the venv")]),
    errors.SandboxCrashed("the sandboxed process ended with exit status 3", exitcode=3),
    errors.SandboxTimeout("tools.slow did not finish within 2.5 s", timeout=2.5),
]


@pytest.mark.parametrize("exc", REFUSALS, ids=lambda e: type(e).__name__)
def test_every_exception_pickles_with_its_fields(exc: BaseException) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    assert vars(back) == vars(exc)


def test_a_sandbox_timeout_is_also_a_timeout_error() -> None:
    timeout = errors.SandboxTimeout("too slow", timeout=1.0)
    assert isinstance(timeout, TimeoutError)
    assert isinstance(timeout, errors.SandBoxError)


BUILTIN_TWIN = {
    errors.RuleFileNotFoundError: FileNotFoundError,
    errors.RulePermissionError: PermissionError,
    errors.RuleSocketConnectionRefusedError: ConnectionRefusedError,
    errors.RuleModuleNotFoundError: ModuleNotFoundError,
    errors.RuleApiPermissionError: PermissionError,
}


@pytest.mark.parametrize(
    "exc",
    [e for e in REFUSALS if type(e) in BUILTIN_TWIN],
    ids=lambda e: type(e).__name__,
)
def test_refusals_are_also_the_builtin_failure(exc: BaseException) -> None:
    assert isinstance(exc, errors.SandBoxError)
    assert isinstance(exc, BUILTIN_TWIN[type(exc)])


def test_refusal_message_survives_filename_set_by_shutil() -> None:
    exc = errors.RuleFileNotFoundError("Access to '/x' must be accepted by a rule.", path="/x")
    exc.filename = "/x"
    assert str(exc) == "Access to '/x' must be accepted by a rule."
    assert exc.errno == 2


def test_config_error_lists_every_issue_sorted() -> None:
    exc = errors.ConfigSyntaxError(
        [errors.ConfigIssue("b", 2, "second"), errors.ConfigIssue("a", 9, "first")]
    )
    assert str(exc).splitlines() == [
        "Syntax error in config files.",
        "  a(9): first",
        "  b(2): second",
    ]


def test_a_refusal_at_start_up_has_its_own_heading() -> None:
    # Rules that read well but are refused are no syntax error; still caught as one.
    issue = errors.ConfigIssue(".py-sandboxes", 2, "'expose-rw=.venv' lets the sandbox write")
    exc = errors.ConfigRefusedError([issue])
    assert isinstance(exc, errors.ConfigSyntaxError)
    assert str(exc).splitlines() == [
        "Refused at start-up: the rules cannot be used as they are.",
        "  .py-sandboxes(2): 'expose-rw=.venv' lets the sandbox write",
    ]
    assert pysandboxes.sandbox_denials(exc) == []


def test_sandbox_denials_walks_causes_contexts_and_groups() -> None:
    denial = errors.RulePermissionError("Cannot write to '/d'.", path="/d")
    with pytest.raises(ExceptionGroup) as caught:
        try:
            raise denial
        except PermissionError as exc:
            raise ExceptionGroup("many", [ValueError("v"), RuntimeError("wrapped")]) from exc
    found = pysandboxes.sandbox_denials(caught.value)
    assert found == ["RulePermissionError: Cannot write to '/d'."]
    assert pysandboxes.sandbox_denials(ValueError()) == []


def test_not_in_sandbox_on_the_host() -> None:
    assert pysandboxes.is_in_sandbox() is False
