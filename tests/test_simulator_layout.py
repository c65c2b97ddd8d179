"""The simulator's modules import one another in one direction: no cycles, none dodged.

Read from the source, so a cycle hidden in a function body or under ``TYPE_CHECKING`` counts.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fdcore.simulator

PACKAGE = "fdcore.simulator"
SOURCE = Path(fdcore.simulator.__file__).parent


def module_name(path: Path) -> str:
    return PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"


def imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def imports() -> dict[str, list[tuple[str, bool]]]:
    """module -> every fdcore module it imports, and whether at the module's top level."""
    found: dict[str, list[tuple[str, bool]]] = {}
    for path in sorted(SOURCE.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        top = {id(node) for node in tree.body}
        found[module_name(path)] = [
            (name, id(node) in top)
            for node in ast.walk(tree)
            for name in imported(node)
            if name.startswith("fdcore")
        ]
    return found


def simulator_graph() -> dict[str, set[str]]:
    return {
        module: {name for name, _top in names if name.startswith(f"{PACKAGE}.")}
        for module, names in imports().items()
    }


def test_every_import_of_a_simulator_module_is_at_the_top_of_the_module() -> None:
    nested = [
        f"{module} imports {name} inside a function or an if-block"
        for module, names in imports().items()
        for name, top in names
        if not top and name.startswith(PACKAGE)
    ]
    assert not nested
    assert all("TYPE_CHECKING" not in path.read_text() for path in SOURCE.glob("*.py"))


def test_no_simulator_module_imports_the_package_that_re_exports_them() -> None:
    for module, names in imports().items():
        if module != PACKAGE:
            assert PACKAGE not in {name for name, _top in names}, module


def test_the_simulator_modules_import_one_another_without_cycles() -> None:
    graph = simulator_graph()
    assert f"{PACKAGE}.world" in graph[f"{PACKAGE}.invariants"]  # the graph is read
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        for dependency in sorted(graph.get(module, ())):
            assert dependency not in path, "cycle: " + " -> ".join([*path, dependency])
            if dependency not in done:
                visit(dependency, [*path, dependency])
        done.add(module)

    for module in graph:
        visit(module, [module])


def test_the_world_imports_no_checker_and_the_checkers_no_run_builder() -> None:
    graph = simulator_graph()
    checkers = {f"{PACKAGE}.invariants", f"{PACKAGE}.schedules"}
    assert not graph[f"{PACKAGE}.world"] & checkers  # checkers are passed in
    for module in checkers:
        assert f"{PACKAGE}.simulation" not in graph[module]


def test_the_simulator_uses_no_layer_above_it() -> None:
    above = ("fdcore.cli", "fdcore.testing")
    for module, names in imports().items():
        assert not [name for name, _top in names if name.startswith(above)], module
