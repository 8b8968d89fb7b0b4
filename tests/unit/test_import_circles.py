"""No two modules of workers/ or pipelines/ import each other, not even for types only.

The acyclic_siblings contract (`lint-imports`) sees run-time imports between packages; a
circle made of a type-only import is as hard to read, and only this walk sees it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("workers", "pipelines")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(tree: ast.Module, modules: dict[str, Path]) -> Iterator[str]:
    """The modules of ours that `tree` imports anywhere (type-only and deferred included):
    `from a.b import c` names `a.b.c` when that is a module, else `a.b`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module in modules and not node.level:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield sub if sub in modules else node.module


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = {m for m in _imported(tree, modules) if m in modules and m != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules that reach each other through imports, one sorted list per circle."""
    reach = {}
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            if (module := todo.pop()) not in seen:
                seen.add(module)
                todo += graph[module]
        reach[start] = seen
    circles = {frozenset(m for m in reach[s] if s in reach[m]) for s in graph if s in reach[s]}
    return sorted(sorted(circle) for circle in circles)


def test_the_walk_sees_a_circle_made_of_a_type_only_import() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from workers.a import A\n"
    modules = {"workers.a": Path("a.py"), "workers.b": Path("b.py")}
    graph = {"workers.a": {"workers.b"}, "workers.b": set(_imported(ast.parse(source), modules))}
    assert _circles(graph) == [["workers.a", "workers.b"]]


def test_no_module_of_workers_or_pipelines_is_in_an_import_circle() -> None:
    assert _circles(_graph()) == []
