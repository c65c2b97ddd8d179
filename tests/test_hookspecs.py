"""Every hook is documented with its exact signature and called by a test (as datasette does)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from fdcore.abc import (
    ClaimPolicy,
    Command,
    HostAdmission,
    LeaseProvider,
    Notifier,
    SlotFunction,
    StorageBackend,
    TableRunner,
    TakeoverPolicy,
)
from fdcore.plugins import hookspecs
from fdcore.plugins.manager import KINDS, load_plugins

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


# what each hook's implementations are, checked on what the installed plugins return
PROTOCOLS = {
    "fdcore_claim_policies": ClaimPolicy,
    "fdcore_commands": Command,
    "fdcore_host_admissions": HostAdmission,
    "fdcore_lease_providers": LeaseProvider,
    "fdcore_notifiers": Notifier,
    "fdcore_slot_functions": SlotFunction,
    "fdcore_storage_backends": StorageBackend,
    "fdcore_table_runners": TableRunner,
    "fdcore_takeover_policies": TakeoverPolicy,
}


def test_there_are_nine_extension_points() -> None:
    assert [name for name, _ in HOOKS] == [
        "fdcore_claim_policies",
        "fdcore_commands",
        "fdcore_host_admissions",
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


def test_every_hook_has_a_kind_and_a_protocol() -> None:
    names = [name for name, _ in HOOKS]
    assert sorted(kind.hook for kind in KINDS) == names
    assert sorted(PROTOCOLS) == names


@pytest.mark.parametrize(("name", "function"), HOOKS, ids=[name for name, _ in HOOKS])
def test_hook_called_through_pluggy_returns_its_protocol(name: str, function: object) -> None:
    """Call the hook as pluggy does: every installed implementation is what it says it is, and
    the manager attributes exactly these to their plugins."""
    plugins = load_plugins()
    results = getattr(plugins.manager.hook, name)()
    returned = [impl for result in results for impl in result]
    assert returned, f"no installed plugin implements {name}"
    for impl in returned:
        assert isinstance(impl, PROTOCOLS[name]), f"{impl!r} is not a {PROTOCOLS[name].__name__}"
    kind = next(kind for kind in KINDS if kind.hook == name)
    assert sorted(impl.name for impl in returned) == sorted(plugins.implementations(kind))


@pytest.mark.parametrize(("name", "function"), HOOKS, ids=[name for name, _ in HOOKS])
def test_hook_is_implemented_in_a_test_or_by_a_tested_plugin(name: str, function: object) -> None:
    """A hook counts as exercised when a test implements it, or uses what it registers."""
    kind = next(kind for kind in KINDS if kind.hook == name)
    implemented_in_tests = any(name in path.read_text() for path in TEST_FILES)
    names = load_plugins().implementations(kind)
    used_in_tests = any(
        f'"{impl}"' in path.read_text() or f"'{impl}'" in path.read_text()
        for impl in names
        for path in TEST_FILES
    )
    assert implemented_in_tests or used_in_tests, f"no test exercises {name}"


def _protocols() -> list[type]:
    from fdcore import abc

    return [
        value
        for name, value in sorted(vars(abc).items())
        if isinstance(value, type)
        and getattr(value, "_is_protocol", False)
        and value.__module__ == abc.__name__
    ]


def member_signature(protocol: type, name: str) -> str:
    """``name(param: type, *, flag: type = default) -> returns`` as written in fdcore/abc.py (the
    annotations are its source text), or ``name: type`` for an attribute."""
    member = protocol.__dict__.get(name)
    if not callable(member):
        return f"{name}: {inspect.get_annotations(protocol)[name]}"
    params, keyword_only = [], False
    for param in list(inspect.signature(member).parameters.values())[1:]:  # not self
        if param.kind is param.KEYWORD_ONLY and not keyword_only:
            params.append("*")
            keyword_only = True
        text = f"{param.name}: {param.annotation}"
        if param.default is not param.empty:
            default = f'"{param.default}"' if isinstance(param.default, str) else param.default
            text += f" = {default}"
        params.append(text)
    return f"{name}({', '.join(params)}) -> {inspect.signature(member).return_annotation}"


def protocol_members(protocol: type) -> list[str]:
    own = [name for name in protocol.__dict__ if not name.startswith("_")]
    own += [name for name in inspect.get_annotations(protocol) if name not in own]
    return own


def test_the_protocols_are_found() -> None:
    names = [protocol.__name__ for protocol in _protocols()]
    assert {"Storage", "StorageBackend", "VersionedListing", "HostGate", "Command"} <= set(names)
    assert member_signature(StorageBackend, "open") == (
        "open(url: str, options: dict[str, str], *, create: bool = True) -> Storage"
    )


@pytest.mark.parametrize("protocol", _protocols(), ids=lambda protocol: protocol.__name__)
def test_protocol_is_documented_with_its_signatures(protocol: type) -> None:
    """docs/plugins.md names the protocol and writes each of its members as fdcore/abc.py does."""
    docs = (ROOT / "docs" / "plugins.md").read_text().replace("\\|", "|")  # tables escape |
    assert f"`fdcore.abc.{protocol.__name__}`" in docs or f"**`{protocol.__name__}`**" in docs
    missing = [
        member_signature(protocol, name)
        for name in protocol_members(protocol)
        if f"`{member_signature(protocol, name)}`" not in docs
    ]
    assert not missing, f"docs/plugins.md lacks {protocol.__name__}: {missing}"


def test_the_abc_docstring_names_every_kind_of_plugin() -> None:
    """fdcore/abc.py's docstring lists every extension point a hook registers."""
    from fdcore import abc

    doc = " ".join((abc.__doc__ or "").split())
    missing = [kind.label for kind in KINDS if kind.label not in doc]
    assert not missing, f"fdcore/abc.py's docstring leaves out {missing}"
