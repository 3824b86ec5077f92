"""No import circles among the package's modules: every import statement (module level, inside a
function, under ``TYPE_CHECKING``) of every module under ``analysis/``, read with ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from paths import REPO_ROOT


def module_files(root: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` under ``root/analysis`` (a package is its
    ``__init__``)."""
    out = {}
    for path in sorted((root / "analysis").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its code: ``import a.b``, ``from a
    import b`` (``a.b`` when it is a module, else ``a``), relative imports resolved."""

    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(filter(None, (known(alias.name) for alias in node.names)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                target = f"{source}.{alias.name}"
                found.add(target if target in modules else known(source))
    found.discard(None)
    found.discard(name)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = module_files(root)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One import circle through ``component``'s first module, as ``[a, b, ..., a]``."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & members):
            if child == start:
                return paths[node] + [start]
            if child not in paths:
                paths[child] = paths[node] + [child]
                queue.append(child)
    return component


def test_no_import_cycles():
    graph = import_graph(REPO_ROOT)
    assert "analysis.registry" in graph and "analysis.metrics.kernel_types" in graph
    circles = [" -> ".join(a_cycle(graph, c)) for c in cycles(graph)]
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_registry_imports_no_catalogue():
    graph = import_graph(REPO_ROOT)
    assert not {m for m in graph["analysis.registry"]
                if m == "analysis.analyses" or m.startswith("analysis.metrics")}


@pytest.mark.parametrize("code, expected", [
    # a lazy import inside a function still closes a circle
    ({"a": "import analysis.b", "b": "def f():\n    from analysis import a"},
     [["analysis.a", "analysis.b"]]),
    # so does a typing-only one
    ({"a": "from analysis.b import X", "b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
      "    from analysis.a import Y"}, [["analysis.a", "analysis.b"]]),
    # relative imports are resolved; three modules in a ring
    ({"a": "from . import b", "b": "from .c import Z", "c": "from .a import W"},
     [["analysis.a", "analysis.b", "analysis.c"]]),
    ({"a": "import analysis.b", "b": "import os"}, []),
])
def test_the_check_finds_circles(tmp_path, code, expected):
    package = tmp_path / "analysis"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in code.items():
        (package / f"{name}.py").write_text(text + "\n")
    graph = import_graph(tmp_path)
    assert cycles(graph) == expected
    for component in expected:
        circle = a_cycle(graph, component)
        assert circle[0] == circle[-1] and set(circle) == set(component)
