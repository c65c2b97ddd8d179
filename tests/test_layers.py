"""The core's layers: no module imports a layer above its own, and no import cycle anywhere.

Every import counts, including those inside functions and under ``TYPE_CHECKING``: an import
moved into a function to dodge a cycle is still the cycle. docs/architecture.md shows the layers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import fdcore

ROOT = Path(fdcore.__file__).parent
REPO = ROOT.parent

#: Lowest first. A module may import its own layer and the layers below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("fdcore.errors", "fdcore.clock", "fdcore.durations", "fdcore.retry", "fdcore.terminal"),
    ("fdcore.contract",),
    ("fdcore.abc",),
    ("fdcore.plugins",),
    ("fdcore.builtin",),
    ("fdcore.mailbox",),
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
#: What a plugin written outside this repository may import (docs/plugins.md): the facade's
#: ``hookimpl``, the protocols, errors, mailbox contract, durations, the retry policy of stores
#: behind a network, and the test kit.
PUBLIC_API = (
    "fdcore.abc",
    "fdcore.errors",
    "fdcore.contract",
    "fdcore.durations",
    "fdcore.retry",
    "fdcore.testing",
)
#: What fdcore-monitor may import: the public API and the environment's public face, which
#: gives it the commands' rows and actions (docs/architecture.md).
MONITOR_API = (*PUBLIC_API, "fdcore.environment")
#: Plugins that prove a vendor needs nothing else: the storage backends (fdcore-s3 was written
#: as a vendor would) and the template vendors start from.
VENDOR_PACKAGES = (
    "plugins/s3/fdcore_s3",
    "plugins/localfs/fdcore_localfs",
    "plugins/onelake/fdcore_onelake",
    "contrib/plugin-template/fdcore_plugin_template",
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


def test_the_facade_imports_only_the_plugin_marker_and_the_command_line() -> None:
    edges = graph()
    assert edges["fdcore"] <= {"fdcore.plugins", "fdcore.plugins.hookspecs"}
    assert edges["fdcore.__main__"] <= {"fdcore.cli", "fdcore.cli.main"}


def test_no_import_cycle() -> None:
    edges = graph()
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
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                found.append(component)
    return found


def test_the_graph_holds_real_edges() -> None:
    """The graph is built from real imports: a known upward and a known downward edge."""
    edges = graph()
    assert "fdcore.errors" in edges["fdcore.abc"]
    assert strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}, {"c"}]


def private_imports(package: Path, allowed: tuple[str, ...] = PUBLIC_API) -> list[str]:
    """The imports of fdcore modules outside ``allowed`` in ``package``'s code."""
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
        and not any(target == api or target.startswith(api + ".") for api in allowed)
    ]


@pytest.mark.parametrize("package", VENDOR_PACKAGES)
def test_a_vendors_plugin_imports_only_the_public_api(package: str) -> None:
    assert (REPO / package).is_dir(), package
    found = private_imports(REPO / package)
    assert not found, "\n".join(found)


def test_the_monitor_imports_the_public_api_and_the_environment_only() -> None:
    """fdcore-monitor is a front end over :mod:`fdcore.environment`, the public face the
    commands use too: no ``fdcore.cli``, no mailbox internals."""
    found = private_imports(REPO / "plugins/monitor/fdcore_monitor", MONITOR_API)
    assert not found, "\n".join(found)


def test_the_public_api_check_sees_a_private_import(tmp_path: Path) -> None:
    package = tmp_path / "fdcore_stray"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "reads.py").write_text(
        "from fdcore.cli.commands import open_mailbox\nfrom fdcore.environment import queue_rows\n",
        encoding="utf-8",
    )
    assert private_imports(package, MONITOR_API) == [
        "fdcore_stray.reads imports fdcore.cli.commands"
    ]
    assert private_imports(package) == [
        "fdcore_stray.reads imports fdcore.cli.commands",
        "fdcore_stray.reads imports fdcore.environment",
    ]
