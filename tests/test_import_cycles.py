"""No circle of imports through more than two modules (issue 28's "no circle of more than two files").

Two modules that import each other (one of them lazily, inside a function) are a pair that belongs
together; a circle through three or more is a knot nobody can change one piece of. Imports made only
for type checking (`if TYPE_CHECKING:`) do not count: they never run. The graph is grimp's, the
library under import-linter (`make lint`).
"""

from __future__ import annotations

import sys

import grimp

# Circles still being untied, each with why it exists and what removes it. Empty this as they go.
KNOWN: dict[frozenset[str], str] = {}


def _strongly_connected(graph: grimp.ImportGraph) -> list[set[str]]:
    """Tarjan's algorithm over the module graph: every set of modules that reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            found.append(component)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(graph.modules):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_no_import_circle_through_more_than_two_modules() -> None:
    graph = grimp.build_graph("mcpfleet", exclude_type_checking_imports=True)
    circles = [c for c in _strongly_connected(graph) if len(c) > 2 and frozenset(c) not in KNOWN]
    assert not circles, "import circles through more than two modules: " + "; ".join(
        " <-> ".join(sorted(c)) for c in circles
    )


def test_the_check_finds_a_circle() -> None:
    """The algorithm itself, on a graph with a three-module circle and a two-module pair."""
    graph = grimp.ImportGraph()
    for name in ("a", "b", "c", "d", "e"):
        graph.add_module(name)
    for importer, imported in (("a", "b"), ("b", "c"), ("c", "a"), ("d", "e"), ("e", "d")):
        graph.add_import(importer=importer, imported=imported)
    sizes = sorted(len(c) for c in _strongly_connected(graph))
    assert sizes == [2, 3]
