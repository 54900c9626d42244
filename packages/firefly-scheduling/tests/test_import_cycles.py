"""Core's modules import each other without a cycle, counting every import statement.

`TYPE_CHECKING` blocks and imports inside functions count too: a cycle hidden behind
them (`hosts.fires` once reached `hosts.execute` through a lazy module `__getattr__`,
and `hosts.runtime` reached `hosts.fires` under `TYPE_CHECKING`) still means two
modules that cannot be understood, or moved, one without the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import firefly_scheduling

ROOT = Path(firefly_scheduling.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(path): path for path in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    imported.add(submodule if submodule in modules else node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        graph[name] = {other for other in imported if other in modules and other != name}
    return graph


def cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path start -> ... -> start, or None."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for other in sorted(graph[node]):
            if other == start:
                return [*path, start]
            if other not in seen:
                seen.add(other)
                stack.append((other, [*path, other]))
    return None


def test_no_core_module_reaches_itself_through_its_imports() -> None:
    graph = import_graph()
    assert "firefly_scheduling.hosts.runtime.task_runtime" in graph  # the walk found the modules
    cycles = [cycle for name in sorted(graph) if (cycle := cycle_through(graph, name))]
    assert cycles == [], " ; ".join(" -> ".join(cycle) for cycle in cycles[:3])
