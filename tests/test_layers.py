"""The core's layers: no module imports a layer above its own, and no import cycle anywhere.

Every import counts, including those inside functions and under ``TYPE_CHECKING``: an import
moved into a function to dodge a cycle is still the cycle. docs/architecture.md shows the layers.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import fdcore

ROOT = Path(fdcore.__file__).parent
REPO = ROOT.parent

#: Lowest first. A module may import its own layer and the layers below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "fdcore.errors",
        "fdcore.clock",
        "fdcore.durations",
        "fdcore.pricing",
        "fdcore.tomlfile",
        "fdcore.retry",
        "fdcore.terminal",
        "fdcore.webhook",
    ),
    ("fdcore.contract",),
    ("fdcore.settings",),
    ("fdcore.abc",),
    ("fdcore.plugins",),
    ("fdcore.mailbox",),
    ("fdcore.builtin", "fdcore.table"),
    ("fdcore.conformance",),
    ("fdcore.agent",),
    ("fdcore.incidents",),
    ("fdcore.simulator",),
    ("fdcore.environment",),
    ("fdcore.cli",),
    ("fdcore.testing",),
)
#: The package itself: ``fdcore/__init__.py`` (version, contract numbers, ``hookimpl``) and
#: ``python -m fdcore``. Any module may read ``fdcore.__version__``.
FACADE = ("fdcore", "fdcore.__main__")
#: What plugins and users may import (docs/architecture.md, "Public API"; docs/plugins.md): the
#: facade's ``hookimpl``, the protocols, errors, mailbox contract, durations, the checks of a
#: setting (a plugin's flags and options), the retry policy of
#: stores behind a network, the webhook POST of notifiers, the views of an environment's mailbox,
#: a table process's fenced write, and the test kit. Everything else is internal.
PUBLIC_API = (
    "fdcore.abc",
    "fdcore.errors",
    "fdcore.contract",
    "fdcore.durations",
    "fdcore.settings",
    "fdcore.retry",
    "fdcore.webhook",
    "fdcore.environment",
    "fdcore.table",
    "fdcore.testing",
)
#: The packages the repository's plugin distributions ship (their tests may use more).
PLUGIN_PACKAGES = tuple(
    str(path.parent.relative_to(REPO))
    for pattern in ("plugins/*/fdcore_*/__init__.py", "contrib/*/fdcore_*/__init__.py")
    for path in sorted(REPO.glob(pattern))
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def imports(path: Path, name: str, known: set[str]) -> Iterator[str]:
    """The fdcore modules ``path`` imports (``from a import b`` counts ``a.b`` if a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            targets = [f"{base}.{alias.name}" for alias in node.names]
            targets = [t if t in known else base for t in targets]
        else:
            continue
        for target in targets:
            while target and target not in known:  # fdcore.x.y.Name -> fdcore.x.y
                target = target.rpartition(".")[0]
            if target.startswith("fdcore") and target != name:
                yield target


def layer_of(name: str) -> int:
    for index, layer in enumerate(LAYERS):
        if any(name == top or name.startswith(top + ".") for top in layer):
            return index
    raise AssertionError(f"{name} belongs to no layer: add it to LAYERS and docs/architecture.md")


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: set(imports(path, name, known)) for name, path in found.items()}


def test_every_module_belongs_to_a_layer() -> None:
    for name in graph():
        if name not in FACADE:
            layer_of(name)


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = [
        f"{name} (layer {layer_of(name)}) imports {target} (layer {layer_of(target)})"
        for name, targets in graph().items()
        if name not in FACADE
        for target in sorted(targets)
        if target not in FACADE and layer_of(target) > layer_of(name)
    ]
    assert not upward, "\n".join(upward)


#: (package, package it imports nothing from): the public face keeps to the contract and the
#: mailbox, never the agent's internals. One line per rule.
APART: tuple[tuple[str, str], ...] = (
    ("fdcore.environment", "fdcore.agent"),
    ("fdcore.incidents", "fdcore.agent"),
)


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def imports_between(edges: dict[str, set[str]], package: str, other: str) -> list[str]:
    return [
        f"{name} imports {target}"
        for name, targets in sorted(edges.items())
        if within(name, package)
        for target in sorted(targets)
        if within(target, other)
    ]


@pytest.mark.parametrize(("package", "other"), APART)
def test_a_package_imports_nothing_from_one_kept_apart(package: str, other: str) -> None:
    found = imports_between(graph(), package, other)
    assert not found, "\n".join(found)


def test_the_apart_check_sees_an_import() -> None:
    edges = {"fdcore.environment.views": {"fdcore.agent.schedules", "fdcore.contract"}}
    assert imports_between(edges, "fdcore.environment", "fdcore.agent") == [
        "fdcore.environment.views imports fdcore.agent.schedules"
    ]


#: What ``fdcore/__init__.py`` loads on first use of a name (PEP 562 ``__getattr__``), never
#: while ``import fdcore`` runs: ``from fdcore import Environment``.
FACADE_ON_USE = {"fdcore.environment", "fdcore.errors"}


def test_the_facade_imports_only_the_plugin_marker_and_the_command_line() -> None:
    edges = graph()
    assert edges["fdcore"] <= {"fdcore.plugins", "fdcore.plugins.hookspecs", *FACADE_ON_USE}
    assert edges["fdcore.__main__"] <= {"fdcore.cli", "fdcore.cli.main"}


def test_importing_the_facade_loads_no_public_api_module() -> None:
    """The names ``fdcore`` gives from the public API load on first use only: a module that
    reads ``fdcore.__version__`` while ``fdcore.environment`` loads is no cycle."""
    code = (
        "import sys, fdcore; "
        "assert 'fdcore.environment' not in sys.modules; "
        "from fdcore import Environment, RequestFailed; "
        "assert Environment.__module__ == 'fdcore.environment.client'; "
        "assert RequestFailed.__module__ == 'fdcore.errors'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_loading_the_plugins_imports_no_storage_sdk() -> None:
    """Every command loads every installed plugin; a storage backend's SDK (the Azure SDK, boto3:
    most of a second together) is imported only by a process that opens that storage."""
    code = (
        "import sys; from fdcore.plugins.manager import load_plugins; load_plugins(); "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('azure', 'boto3', "
        "'botocore')); assert not heavy, heavy; "
        "import fdcore_onelake, fdcore_s3; fdcore_onelake.OneLakeStorage; fdcore_s3.S3Storage; "
        "assert 'azure.storage.blob' in sys.modules and 'boto3' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_import_cycle() -> None:
    edges = graph()
    edges["fdcore"] -= FACADE_ON_USE  # loaded on first use, after the facade (test above)
    # A package's __init__ re-exporting its modules is not a cycle with them; a module that
    # imports its own package's __init__ while that __init__ imports it is.
    cycles = [scc for scc in strongly_connected(edges) if len(scc) > 1]
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(sorted(c)) for c in cycles)


def strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively (the graph is small, but recursion limits are not)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                found.append(_pop_component(node, stack, on_stack))
    return found


def _pop_component(root: str, stack: list[str], on_stack: set[str]) -> set[str]:
    """The strongly connected component ``root`` heads: the stack down to ``root``."""
    component = set()
    while True:
        member = stack.pop()
        on_stack.discard(member)
        component.add(member)
        if member == root:
            return component


def test_the_graph_holds_real_edges() -> None:
    """The graph is built from real imports: a known upward and a known downward edge."""
    edges = graph()
    assert "fdcore.errors" in edges["fdcore.abc"]
    assert strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}, {"c"}]


def private_imports(package: Path) -> list[str]:
    """The imports of fdcore modules outside the public API in ``package``'s code."""
    own = package.name
    paths = {
        ".".join((own, *path.relative_to(package).with_suffix("").parts)).removesuffix(
            ".__init__"
        ): path
        for path in sorted(package.rglob("*.py"))
    }
    known = set(modules()) | set(paths)
    return [
        f"{name} imports {target}"
        for name, path in paths.items()
        for target in sorted(set(imports(path, name, known)))
        if target.partition(".")[0] == "fdcore"
        and target != "fdcore"  # the facade: hookimpl, __version__
        and not any(target == api or target.startswith(api + ".") for api in PUBLIC_API)
    ]


def test_the_plugin_packages_are_found() -> None:
    for package in ("plugins/s3/fdcore_s3", "plugins/monitor/fdcore_monitor"):
        assert package in PLUGIN_PACKAGES
    assert "contrib/plugin-template/fdcore_plugin_template" in PLUGIN_PACKAGES


@pytest.mark.parametrize("package", PLUGIN_PACKAGES)
def test_a_plugin_imports_only_the_public_api(package: str) -> None:
    found = private_imports(REPO / package)
    assert not found, "\n".join(found)


#: Tests that teach plugin authors: they use what a plugin's own tests may use, the public API.
TEACHING_TESTS = ("contrib/plugin-template/tests",)


@pytest.mark.parametrize("folder", TEACHING_TESTS)
def test_the_plugin_templates_tests_import_only_the_public_api(folder: str) -> None:
    assert any((REPO / folder).glob("test_*.py"))
    found = private_imports(REPO / folder)
    assert not found, "\n".join(found)


def test_the_public_api_check_sees_a_private_import(tmp_path: Path) -> None:
    package = tmp_path / "fdcore_sneaky"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from fdcore.abc import Storage\n"
        "def f() -> None:\n"
        "    from fdcore.mailbox.access import Mailbox\n"
    )
    assert private_imports(package) == ["fdcore_sneaky imports fdcore.mailbox.access"]


def test_the_public_modules_say_what_they_export() -> None:
    """Each public module has a curated ``__all__`` of names it defines or re-exports."""
    found = modules()
    public = [
        name
        for name, path in found.items()
        if any(name == api or name.startswith(api + ".") for api in PUBLIC_API)
        and path.name != "__init__.py"
    ]
    assert "fdcore.abc" in public and "fdcore.testing.assertions" in public
    missing = [name for name in public if "__all__" not in _assigned(found[name])]
    assert not missing, f"public modules without __all__: {missing}"
    for name in public:
        module = importlib.import_module(name)
        unknown = [export for export in module.__all__ if not hasattr(module, export)]
        assert not unknown, f"{name}.__all__ names what it does not have: {unknown}"


def test_the_internal_packages_say_so() -> None:
    internal = [
        name
        for name, path in modules().items()
        if path.name == "__init__.py"
        and name.count(".") == 1
        and not any(name == api for api in PUBLIC_API)
    ]
    assert "fdcore.agent" in internal and "fdcore.cli" in internal
    for name in internal:
        path = ROOT / name.partition(".")[2] / "__init__.py"
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert "Internal: not part of fdcore's public API" in doc, name
        assert "__all__" in _assigned(path), name


def _assigned(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names
