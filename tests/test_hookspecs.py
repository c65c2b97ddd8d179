"""Every hook is documented with its exact signature and exercised by a test (as datasette does)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from fdcore.plugins import hookspecs

ROOT = Path(__file__).parents[1]
HOOKS = sorted(
    (name, function)
    for name, function in inspect.getmembers(hookspecs, inspect.isfunction)
    if name.startswith("fdcore_")
)
TEST_FILES = [
    path
    for pattern in ("tests/**/*.py", "plugins/*/tests/**/*.py", "contrib/*/tests/**/*.py")
    for path in ROOT.glob(pattern)
    if path.name != Path(__file__).name
]


def signature(function: object) -> str:
    annotations = dict(function.__annotations__)  # type: ignore[attr-defined]
    returns = annotations.pop("return")
    params = ", ".join(f"{name}: {kind}" for name, kind in annotations.items())
    return f"{function.__name__}({params}) -> {returns}"  # type: ignore[attr-defined]


def test_there_are_seven_extension_points() -> None:
    assert [name for name, _ in HOOKS] == [
        "fdcore_claim_policies",
        "fdcore_lease_providers",
        "fdcore_notifiers",
        "fdcore_slot_functions",
        "fdcore_storage_backends",
        "fdcore_table_runners",
        "fdcore_takeover_policies",
    ]


@pytest.mark.parametrize(("name", "function"), HOOKS, ids=[name for name, _ in HOOKS])
def test_hook_is_documented_with_its_signature(name: str, function: object) -> None:
    docs = (ROOT / "docs" / "plugins.md").read_text()
    assert f"### `{signature(function)}`" in docs


@pytest.mark.parametrize(("name", "function"), HOOKS, ids=[name for name, _ in HOOKS])
def test_hook_has_a_docstring_saying_when_it_is_called(name: str, function: object) -> None:
    doc = inspect.getdoc(function) or ""
    assert "Called once" in doc or "called once" in doc


@pytest.mark.parametrize(("name", "function"), HOOKS, ids=[name for name, _ in HOOKS])
def test_hook_is_implemented_in_a_test_or_by_a_tested_plugin(name: str, function: object) -> None:
    """A hook counts as exercised when a test implements it, or uses what it registers."""
    from fdcore.plugins.manager import KINDS, load_plugins

    kind = next(kind for kind in KINDS if kind.hook == name)
    implemented_in_tests = any(name in path.read_text() for path in TEST_FILES)
    names = load_plugins().implementations(kind)
    used_in_tests = any(
        f'"{impl}"' in path.read_text() or f"'{impl}'" in path.read_text()
        for impl in names
        for path in TEST_FILES
    )
    assert implemented_in_tests or used_in_tests, f"no test exercises {name}"
