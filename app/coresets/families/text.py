"""Text coresets (papers/000): selection on item-text embeddings, predictions by coreset means.

* validate: every benchmark has items with text; the budget fits (``app.coresets.budget``); the
  optional ``reference_models`` (they tune facility location's alpha, papers/000 §4.1) exist.
* job (``coreset``, queue ``gpu``): embed the missing texts (``app.embeddings``), tune alpha on the
  references' scores when asked, select with ``app.core.selection`` (a fraction budget selects each
  benchmark on its own and merges the orders), persist the ranked items.
* predict: ``app.core.prediction.estimate_from_coreset`` (means with finite-population intervals);
  ``extrapolation`` when the target's coreset mean leaves the references' range on some benchmark.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.benchmarks.score_matrix import load_matrix
from app.core.intervals import extrapolation_flag
from app.core.prediction import estimate_from_coreset
from app.core.selection import TEXT_METHODS
from app.core.selection.facility_location import sparsity_t
from app.core.selection.tuning import DEFAULT_GRID, tune_alpha
from app.coresets.budget import plan_budget
from app.coresets.curation import frozen_state
from app.coresets.families.base import CoresetRequest, SelectionPlan, TargetScores
from app.coresets.repository import load_for_job, save_selection
from app.db.models import Benchmark, BenchmarkModel, Coreset, CoresetItem, Item, Model, Score
from app.embeddings.repository import load_embeddings
from app.embeddings.service import ensure_embeddings
from app.kit.errors import ErrorCollector
from app.kit.jobs import JobContext
from app.kit.validation import check_selector_params, json_safe
from app.models.service import get_reference_models

STRATIFIED_BY_DEFAULT = {"facility_location": True, "stratified_random": True}
MAX_GRAPH_ENTRIES = 50_000_000  # ~600 MB of CSR (float32 + int32 indices) per candidate graph
EXTRAPOLATION_TOLERANCE = 1e-12  # coreset means within this of the references' range are inside it


class TextFamily:
    """Text-only methods on item-text embeddings (papers/000 §3.1 and the §4.2 baselines)."""

    name = "text"
    methods = tuple(TEXT_METHODS)
    job_kind = "coreset"
    queue = "gpu"
    default_level = 0.95

    def check_params(self, method: str, params: dict[str, Any], seed: int, *,
                     field: str = "params") -> dict[str, Any]:
        return check_selector_params(TEXT_METHODS[method], params, seed, method=method, field=field)

    def validate(self, session: Session, request: CoresetRequest, benchmarks: list[Benchmark]) -> SelectionPlan:
        counts = text_item_counts(session, [b.id for b in benchmarks])
        errors = ErrorCollector()
        for b in benchmarks:
            n, n_text = counts[b.id]
            if n == 0:
                errors.add(f"benchmark {b.name!r} has no items", field="benchmarks", benchmark=b.name)
            elif n_text == 0:
                errors.add(f"benchmark {b.name!r} has no item text; text method {request.method!r} needs prompts "
                           "(upload items with POST /v1/benchmarks/{benchmark}/items)", field="benchmarks",
                           benchmark=b.name)
        errors.raise_if_any("benchmarks cannot be used")
        sizes = [counts[b.id][1] for b in benchmarks]
        stratified = bool(request.params.get("stratify", STRATIFIED_BY_DEFAULT.get(request.method, False)))
        plan = plan_budget(request.budget, sizes, [b.name for b in benchmarks], stratified)
        references = request.reference_models
        if references is not None and references != "all":
            references = [m.name for m in get_reference_models(session, references)]
        return SelectionPlan(payload={"per_benchmark": plan.per_benchmark, "k": plan.total},
                             reference_models=references, predictor=request.predictor,
                             embedding_model=request.embedding_model)

    def select(self, ctx: JobContext, coreset_id: str) -> dict[str, Any]:
        return select_text_coreset(ctx, coreset_id, ctx.payload["k"], ctx.payload.get("per_benchmark"))

    def predict(self, session: Session, coreset: Coreset, scores: TargetScores, level: float) -> dict[str, Any]:
        benchmarks = scores.benchmarks
        by_benchmark: dict[str, list[float]] = {}
        for pk, value in scores.values.items():
            by_benchmark.setdefault(scores.benchmark_of[pk], []).append(value)
        frozen = frozen_state(session, coreset)
        if frozen is not None:
            sizes, means = frozen["n_items"], frozen["reference_means"]
        else:
            sizes, means = benchmark_sizes(session, list(benchmarks)), reference_means(session, coreset)
        order = list(coreset.benchmark_ids)
        index = {b: i for i, b in enumerate(order)}
        pairs = [(index[b], v) for b, vs in by_benchmark.items() for v in vs]
        result = estimate_from_coreset(
            np.array([v for _, v in pairs]), np.array([i for i, _ in pairs], dtype=np.int64),
            [int(sizes.get(b, 0)) for b in order],
            [benchmarks[b].capability or benchmarks[b].name for b in order],
            level=level,
            score_range=[score_range(benchmarks[b]) for b in order],
            binary=[benchmarks[b].score_kind == "binary" for b in order],
            benchmark_names=[benchmarks[b].name for b in order],
        )
        result.pop("level", None)
        extrapolation = outside_references(by_benchmark, means)
        return {"coreset": coreset.id, "model": scores.model, "level": level, **json_safe(result),
                "extrapolation": extrapolation}

    def freeze(self, session: Session, coreset: Coreset) -> dict[str, Any]:
        """Each benchmark's item count (the finite-population size) and the references' coreset means
        (the extrapolation test)."""
        return {"n_items": benchmark_sizes(session, list(coreset.benchmark_ids)),
                "reference_means": reference_means(session, coreset)}


TEXT = TextFamily()


# --------------------------------------------------------------------------- validation


def text_item_counts(session: Session, benchmark_ids: list[str]) -> dict[str, tuple[int, int]]:
    """(items, items with text) per benchmark."""
    rows = session.execute(
        select(Item.benchmark_id, func.count(), func.count(Item.prompt))
        .where(Item.benchmark_id.in_(benchmark_ids)).group_by(Item.benchmark_id)
    ).all()
    found = {b: (int(n), int(t)) for b, n, t in rows}
    return {b: found.get(b, (0, 0)) for b in benchmark_ids}


# --------------------------------------------------------------------------- the job


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
    coreset = load_for_job(ctx, coreset_id)
    benchmark_ids = list(coreset.benchmark_ids)
    method, params, seed = coreset.method, dict(coreset.params or {}), coreset.seed
    references, model_name = coreset.reference_models, str(coreset.embedding_model)

    embed_summary = ensure_embeddings(ctx.session_factory, benchmark_ids, model_name,
                                      progress=lambda f: ctx.progress(0.6 * f))
    with ctx.session_factory() as session:
        item_pks, labels, embeddings = load_embeddings(session, benchmark_ids, model_name)
        benchmarks = [session.get_one(Benchmark, b) for b in benchmark_ids]
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
    return {"coreset_id": coreset_id, "n_items": len(rows), **{k_: v for k_,
                                                               v in diagnostics.items() if k_ != "embeddings"}}


# --------------------------------------------------------------------------- predict


def score_range(benchmark: Benchmark) -> tuple[float | None, float | None]:
    if benchmark.score_kind == "binary":
        return 0.0, 1.0
    return benchmark.score_min, benchmark.score_max


def benchmark_sizes(session: Session, benchmark_ids: list[str]) -> dict[str, int]:
    """Items per benchmark now."""
    found = dict(session.execute(select(Item.benchmark_id, func.count()).where(Item.benchmark_id.in_(benchmark_ids))
                                 .group_by(Item.benchmark_id)).all())
    return {b: int(found.get(b, 0)) for b in benchmark_ids}


def reference_means(session: Session, coreset: Coreset) -> dict[str, list[float]]:
    """Per benchmark id, each reference model's mean score (default metric) on the coreset's items
    there, from the stored scores now (empty without reference models)."""
    if not coreset.reference_models:
        return {}
    stmt = select(Model.id)
    if coreset.reference_models != "all":
        stmt = stmt.where(Model.name.in_(list(coreset.reference_models)))
    model_ids = list(session.scalars(stmt))
    rows = session.execute(
        select(Score.model_id, CoresetItem.benchmark_id, Score.value)
        .join(CoresetItem, (CoresetItem.item_pk == Score.item_pk) & (CoresetItem.coreset_id == coreset.id))
        .join(Benchmark, Benchmark.id == CoresetItem.benchmark_id)
        .where(Score.model_id.in_(model_ids), Score.metric == Benchmark.default_metric)
    ).all()
    sums: dict[tuple[str, str], list[float]] = {}
    for model_id, benchmark_id, value in rows:
        sums.setdefault((model_id, benchmark_id), []).append(float(value))
    means: dict[str, list[float]] = {}
    for (_model, benchmark_id), values in sorted(sums.items()):
        means.setdefault(benchmark_id, []).append(float(np.mean(values)))
    return means


def outside_references(by_benchmark: dict[str, list[float]], means: dict[str, list[float]]) -> bool:
    """True when, on some benchmark, the target's coreset mean lies outside the reference models'
    coreset means (``app.core.intervals.extrapolation_flag``, the rule of docs/DECISIONS.md)."""
    for benchmark_id, target_values in by_benchmark.items():
        ref = means.get(benchmark_id) or []
        if ref and extrapolation_flag(float(np.mean(target_values)), np.asarray(ref),
                                      tolerance=EXTRAPOLATION_TOLERANCE):
            return True
    return False
