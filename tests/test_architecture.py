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
    # the evalplan command: a subcommand loads only what it runs, `evalplan --help` none of these
    "cli/admin.py": "the auth services and the database (SQLAlchemy) only for `evalplan admin`",
    "cli/backtest.py": "the CSV parser (the web app's schemas) and scikit-learn's backtests only for `evalplan backtest`",
    "cli/db.py": "Alembic only for `evalplan db upgrade`",
    "cli/plan.py": "the CSV parser (the web app's schemas) and scikit-learn's planner only for `evalplan plan`",
    "cli/serve.py": "Alembic (and uvicorn) only for `evalplan serve`",
    "cli/worker.py": "Celery's app only for `evalplan worker`",
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


# --------------------------------------------------------------------------------------------- table ownership

#: every ORM table -> the domain that owns it: it lives in ``evalplan/db/models/<owner>.py``, only the owner writes
#: it, and another domain reads it only through a repository (docs/ARCHITECTURE.md "Table ownership")
TABLE_OWNERS = {
    "Team": "auth", "ApiToken": "auth", "AuditEntry": "auth",
    "Job": "kit", "JobInput": "kit", "Worker": "kit", "IdempotencyRecord": "kit",
    "Benchmark": "benchmarks", "Item": "benchmarks", "ScoreRow": "benchmarks", "Score": "benchmarks",
    "ModelResponse": "benchmarks", "BenchmarkModel": "benchmarks",
    "Model": "models",
    "Embedding": "embeddings",
    "HiddenState": "hidden_states", "HiddenStateChunk": "hidden_states",
    "BenchmarkSelection": "benchmark_selections",
    "Coreset": "coresets", "CoresetItem": "coresets", "TrainedModel": "coresets",
    "EvalSession": "sessions", "SessionObservation": "sessions", "SessionPrior": "sessions",
}
#: where a table may be named outside its owner without a repository, and why
TABLE_EXCEPTIONS = {
    "db": "the tables themselves (evalplan/db/models/)",
    "migrations": "Alembic's env.py compares the whole metadata",
}
#: modules that still read other domains' tables outside a repository: issue 36 item 2 moves them one by one;
#: the test fails when one of them no longer needs its entry (the list only shrinks)
NOT_YET_MOVED: dict[str, set[str]] = {
    "auth/scoping.py": {"Benchmark", "BenchmarkModel", "Model"},
    "auth/teams.py": {"Benchmark", "Model"},
}
WRITES = ("insert", "update", "delete")


def _annotation_nodes(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        hints: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            hints = [node.returns, *(a.annotation for a in (*node.args.args, *node.args.kwonlyargs,
                                                            *node.args.posonlyargs, node.args.vararg,
                                                            node.args.kwarg) if a is not None)]
        elif isinstance(node, ast.AnnAssign):
            hints = [node.annotation]
        found |= {id(n) for hint in hints if hint is not None for n in ast.walk(hint)}
    return found


def table_touches(name: str, tree: ast.Module, owners: dict[str, str] = TABLE_OWNERS,
                  owning_domains: frozenset[str] | None = None) -> list[str]:
    """What module ``name`` does wrong with other domains' tables: a write (``insert`` / ``update`` /
    ``delete`` of the table, or a new row) anywhere outside the owner, a read outside a repository, or in
    the repository of a domain that owns no table (it calls the owners' repositories instead)."""
    here = _domain(name)
    owning = frozenset(owners.values()) if owning_domains is None else owning_domains
    in_repository = name.rsplit(".", 1)[-1].endswith("repository") and here in owning
    bound = {alias.asname or alias.name: alias.name for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("evalplan.db.models")
             for alias in node.names if alias.name in owners and owners[alias.name] != here}
    hints = _annotation_nodes(tree)
    writes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            if isinstance(node.func, ast.Name) and node.func.id in WRITES:
                writes.add(id(node.args[0]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in bound:
            writes.add(id(node.func))
    wrong = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name) or node.id not in bound or id(node) in hints:
            continue
        table = bound[node.id]
        if id(node) in writes:
            wrong.append(f"{name}:{node.lineno} writes {table}: only {owners[table]} writes it")
        elif not in_repository:
            wrong.append(f"{name}:{node.lineno} reads {table}: call {owners[table]}'s repository")
    return wrong


def test_each_table_lives_with_its_owner() -> None:
    from evalplan.db.models import Base

    mapped = {mapper.class_.__name__: mapper.class_.__module__ for mapper in Base.registry.mappers}
    assert set(mapped) == set(TABLE_OWNERS), "every table needs its owner in TABLE_OWNERS"
    wrong = {table: module for table, module in mapped.items() if module != f"evalplan.db.models.{TABLE_OWNERS[table]}"}
    assert not wrong, f"a table lives in evalplan/db/models/<its owner>.py: {wrong}"
    assert set(TABLE_OWNERS.values()) <= set(RANK), "an owner is a domain of LAYERS"


def test_other_domains_reach_a_table_through_its_owner() -> None:
    wrong, stale = [], []
    modules = {path.relative_to(SRC).as_posix(): (name, tree) for name, (path, tree) in _modules().items()}
    for rel, (name, tree) in sorted(modules.items()):
        if _domain(name) in TABLE_EXCEPTIONS:
            continue
        found = table_touches(name, tree)
        pending = NOT_YET_MOVED.get(rel, set())
        wrong += [f for f in found if f.split(" ")[2].rstrip(":") not in pending]
        stale += [f"{rel}: {t}" for t in sorted(pending) if not any(f.split(" ")[2].rstrip(":") == t for f in found)]
    stale += [f"{rel} (no such module)" for rel in NOT_YET_MOVED if rel not in modules]
    assert not wrong, "\n".join(wrong)
    assert not stale, f"NOT_YET_MOVED lists what the module no longer touches: remove {stale}"


SYNTHETIC = '''
from sqlalchemy import delete, select
from evalplan.db.models import Benchmark, Coreset, CoresetItem

def drop(session, benchmark: Benchmark) -> list[Coreset]:
    own = list(session.scalars(select(Coreset).where(Coreset.team_id == benchmark.team_id)))
    session.execute(delete(CoresetItem).where(CoresetItem.coreset_id == own[0].id))
    return own
'''


def test_the_ownership_check_catches_foreign_reads_and_writes() -> None:
    """The pre-split ``benchmarks.service.delete_benchmark`` (it read and deleted coreset rows) fails; the same
    reads in coresets' repository pass, its write of another domain's table does not; hints never count."""
    tree = ast.parse(SYNTHETIC)
    found = table_touches("evalplan.benchmarks.service", tree)
    assert sorted(" ".join(f.split(" ")[1:3]) for f in found) == [
        "reads Coreset:", "reads Coreset:", "reads CoresetItem:", "writes CoresetItem:"], found  # Benchmark: its own
    assert table_touches("evalplan.coresets.repository", tree) == []  # owner: reads and writes its own
    assert table_touches("evalplan.sessions.repository", tree) == [
        "evalplan.sessions.repository:7 writes CoresetItem: only coresets writes it"]
    assert sorted(" ".join(f.split(" ")[1:3]) for f in table_touches("evalplan.leaderboard.repository", tree)) == [
        "reads Coreset:", "reads Coreset:", "reads CoresetItem:", "writes CoresetItem:"]  # it owns no table
    hinted = ast.parse("from evalplan.db.models import Coreset\ndef f(c: Coreset) -> Coreset:\n    return c\n")
    assert table_touches("evalplan.benchmarks.service", hinted) == []
