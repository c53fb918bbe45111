"""samsa's import graph between its top-level packages, as grimp (import-linter's graph) builds
it from the source: ``python tests/import_graph.py`` (``make import-graph``) prints each package
with the packages it imports, in dependency order; ``tests/test_imports.py`` checks it has no
cycle."""

from __future__ import annotations

import graphlib

import grimp


def package_graph() -> dict[str, set[str]]:
    """Each top-level package (or module) of samsa -> those it imports, itself excluded."""
    graph = grimp.build_graph("samsa")
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        if module == "samsa":
            continue
        top = module.split(".")[1]
        imported = edges.setdefault(top, set())
        for target in graph.find_modules_directly_imported_by(module):
            if target.startswith("samsa.") and target.split(".")[1] != top:
                imported.add(target.split(".")[1])
    return edges


def levels(edges: dict[str, set[str]]) -> dict[str, int]:
    """Each package's height: 0 for one that imports no other, else one more than the highest
    it imports. graphlib.CycleError names a cycle."""
    height: dict[str, int] = {}
    for package in graphlib.TopologicalSorter(edges).static_order():
        height[package] = 1 + max((height[p] for p in edges.get(package, ())), default=-1)
    return height


def main() -> None:
    edges = package_graph()
    height = levels(edges)
    for package in sorted(edges, key=lambda p: (-height[p], p)):
        imported = ", ".join(sorted(edges[package], key=lambda p: (-height[p], p))) or "-"
        print(f"{height[package]:>2} {package:<14} -> {imported}")


if __name__ == "__main__":
    main()
