"""The coreset job's work for text methods: embeddings, optional alpha tuning, selection, persistence."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.selection import TEXT_METHODS
from app.core.selection.facility_location import sparsity_t
from app.core.selection.tuning import DEFAULT_GRID, tune_alpha
from app.db.models import Benchmark, BenchmarkModel, Coreset, Model
from app.embeddings.service import ensure_embeddings, load_embeddings
from app.coresets.repository import save_selection
from app.kit.jobs import JobContext
from app.benchmarks.score_matrix import load_matrix


def reference_matrix(session: Session, benchmarks: list[Benchmark], item_pks: np.ndarray,
                     references: list[str] | str) -> tuple[list[str], np.ndarray]:
    """Scores (models x items, NaN = missing) of the reference models on the given items."""
    if references == "all":
        names = sorted(set(session.scalars(
            select(Model.name).join(BenchmarkModel, BenchmarkModel.model_id == Model.id)
            .where(BenchmarkModel.benchmark_id.in_([b.id for b in benchmarks]))
        )))
    else:
        names = list(references)
    row_of = {n: r for r, n in enumerate(names)}
    col_of = {int(pk): c for c, pk in enumerate(item_pks.tolist())}
    values = np.full((len(names), len(item_pks)), np.nan)
    for benchmark in benchmarks:
        matrix = load_matrix(session, benchmark, benchmark.default_metric)
        cols = [(j, col_of[pk]) for j, pk in enumerate(matrix.item_pks) if pk in col_of]
        if not cols:
            continue
        src, dst = np.array([c[0] for c in cols]), np.array([c[1] for c in cols])
        for i, name in enumerate(matrix.model_names):
            if name in row_of:
                values[row_of[name], dst] = matrix.values[i, src]
    keep = ~np.all(np.isnan(values), axis=1)
    return [n for n, k in zip(names, keep) if k], values[keep]


MAX_GRAPH_ENTRIES = 50_000_000  # ~600 MB of CSR (float32 + int32 indices) per candidate graph


def alpha_grid(n: int, k: int) -> list[float]:
    """The paper's tuning grid, without the alphas whose top-t graph would exceed the memory cap."""
    grid = [a for a in DEFAULT_GRID if sparsity_t(a, n, k) * n <= MAX_GRAPH_ENTRIES]
    return grid or [min(DEFAULT_GRID)]


def _select(method: str, params: dict[str, Any], seed: int, k: int, embeddings: np.ndarray, labels: np.ndarray,
            per_benchmark: list[int] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, dict[str, Any]]:
    """Fit the method; a fraction budget selects each benchmark on its own and merges the orders."""
    cls = TEXT_METHODS[method]
    if per_benchmark is None:
        fitted = cls(k=k, seed=seed, **params).fit(embeddings, labels)
        weights = getattr(fitted, "weights_", None)
        extra = {"objective": float(fitted.objective_)} if hasattr(fitted, "objective_") else {}
        return np.asarray(fitted.ranking_), np.asarray(fitted.gains_, dtype=float), weights, extra
    picks: list[tuple[float, float, int, float, float | None]] = []
    objective = 0.0
    for b, k_b in enumerate(per_benchmark):
        rows = np.flatnonzero(labels == b)
        fitted = cls(k=k_b, seed=seed, **params).fit(embeddings[rows], np.zeros(len(rows), dtype=np.int64))
        objective += float(getattr(fitted, "objective_", 0.0))
        weights = getattr(fitted, "weights_", None)
        for r, (row, gain) in enumerate(zip(fitted.ranking_, fitted.gains_)):
            # facility location: one objective over all blocks, so order by gain; others: proportional interleave
            key = -float(gain) if method == "facility_location" else (r + 1) / k_b
            picks.append((key, b, int(rows[row]), float(gain), None if weights is None else float(weights[r])))
    picks.sort(key=lambda p: (p[0], p[1]))
    ranking = np.array([p[2] for p in picks])
    gains = np.array([p[3] for p in picks])
    weights_arr = None if picks and picks[0][4] is None else np.array([p[4] for p in picks])
    return ranking, gains, weights_arr, ({"objective": objective} if method == "facility_location" else {})


def select_text_coreset(ctx: JobContext, coreset_id: str, k: int, per_benchmark: list[int] | None) -> dict[str, Any]:
    started = time.perf_counter()
    with ctx.session_factory() as session:
        coreset = session.get(Coreset, coreset_id)
        if coreset is None:
            raise LookupError(f"coreset {coreset_id} vanished")
        benchmark_ids = list(coreset.benchmark_ids)
        method, params, seed = coreset.method, dict(coreset.params or {}), coreset.seed
        references, model_name = coreset.reference_models, coreset.embedding_model

    embed_summary = ensure_embeddings(ctx.session_factory, benchmark_ids, model_name,
                                      progress=lambda f: ctx.progress(0.6 * f))
    with ctx.session_factory() as session:
        item_pks, labels, embeddings = load_embeddings(session, benchmark_ids, model_name)
        benchmarks = [session.get(Benchmark, b) for b in benchmark_ids]
        tuning = None
        if method == "facility_location" and references and "alpha" not in params:
            names, calibration = reference_matrix(session, benchmarks, np.asarray(item_pks), references)
            if len(names) > 0:
                capabilities = [b.capability or b.name for b in benchmarks]
                grid = alpha_grid(len(labels), k)
                best, table = tune_alpha(embeddings, labels, k, calibration, capabilities, grid=grid,
                                         stratify=params.get("stratify", True))
                params["alpha"] = best
                tuning = {"reference_models": names, "grid": table, "alpha": best}
    ctx.progress(0.7)

    ranking, gains, weights, extra = _select(method, params, seed, k, embeddings, labels, per_benchmark)
    ctx.progress(0.9)
    item_pks_arr = np.asarray(item_pks)
    rows = [{
        "coreset_id": coreset_id, "rank": r + 1, "item_pk": int(item_pks_arr[i]),
        "benchmark_id": benchmark_ids[int(labels[i])],
        "gain": float(g) if np.isfinite(g) else None,
        "weight": None if weights is None else float(weights[r]),
    } for r, (i, g) in enumerate(zip(ranking.tolist(), gains.tolist()))]
    per_bench = {benchmark_ids[b]: int(np.sum(labels[ranking] == b)) for b in range(len(benchmark_ids))}
    diagnostics = {
        **extra, "k": k, "per_benchmark": per_bench, "embeddings": embed_summary, "alpha_tuning": tuning,
        "seconds": round(time.perf_counter() - started, 3),
    }
    save_selection(ctx, coreset_id, rows, diagnostics, params)
    return {"coreset_id": coreset_id, "n_items": len(rows), **{k_: v for k_, v in diagnostics.items() if k_ != "embeddings"}}
