"""The dependency order of docs/ARCHITECTURE.md ("Dependency order"), checked on the source: every import of
another domain goes down the order, no module import circle, the science core imports no web, database or
queue library, and in-function imports of ``evalplan`` modules only where they avoid a real cost."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "evalplan"

#: lowest first; a domain imports only from lower layers (the same layer is not allowed either)
LAYERS = [
    ["core", "client", "charts", "__init__"],
    ["db"],
    ["kit"],
    ["auth", "integrations", "health", "migrations"],
    ["models"],
    ["benchmarks"],
    ["hidden_states", "embeddings", "benchmark_selections"],
    ["coresets", "sessions", "similarity", "imports"],
    ["backtests", "plans", "leaderboard", "comparisons"],
    ["jobs"],
    ["ui", "workers"],
    ["main", "cli"],
]
RANK = {domain: rank for rank, layer in enumerate(LAYERS) for domain in layer}
#: the only modules that import ``evalplan`` modules inside functions, and why
LAZY = {
    "cli.py": "a subcommand loads only what it runs (no web app, database or numpy for the client commands)",
    "coresets/families/hidden_state.py": "torch, only in the RepCore alignment job ([worker] extra)",
    "workers/dispatch.py": "celery's app only when EVALPLAN_REDIS_URL is set",
}
CORE_FORBIDDEN = ("fastapi", "sqlalchemy", "celery", "starlette", "redis")


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(("evalplan",) + (parts[:-1] if parts[-1] == "__init__" else parts))
        found[name] = (path, ast.parse(path.read_text(encoding="utf-8")))
    return found


def _imports(name: str, path: Path, tree: ast.Module) -> list[tuple[str, ast.AST]]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            out += [(f"{module}.{alias.name}", node) for alias in node.names]
    return out


def _domain(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_imports_follow_the_dependency_order_without_circles() -> None:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    wrong = []
    for name, (path, tree) in modules.items():
        here = _domain(name)
        assert here in RANK, f"{here} (src/evalplan/{here}) has no place in LAYERS: add it to docs/ARCHITECTURE.md"
        nested = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                  for n in ast.walk(f)}
        for target, node in _imports(name, path, tree):
            top = target.split(".")[0]
            if here == "core" and top in CORE_FORBIDDEN:
                wrong.append(f"{name} imports {target}: the science core stays free of web, database and queue")
            if top != "evalplan":
                continue
            while target not in modules and "." in target:  # `from pkg import name` names an attribute
                target = target.rpartition(".")[0]
            there = _domain(target)
            if there != here and RANK[there] >= RANK[here]:
                wrong.append(f"{name} imports {target}: {here} (layer {RANK[here]}) may not import {there} "
                             f"(layer {RANK[there]})")
            if id(node) in nested and str(path.relative_to(SRC)) not in LAZY:
                wrong.append(f"{name} imports {target} inside a function: import it at the top (or add a reason)")
            if target != name:
                graph[name].add(target)
    assert not wrong, "\n".join(wrong)
    assert not _circles(graph), f"import circles: {_circles(graph)}"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
