"""Text coresets (papers/000): selection on item-text embeddings, predictions by coreset means.

* validate: every benchmark has items with text; the budget fits (``evalplan.coresets.budget``); the
  optional ``reference_models`` (they tune facility location's alpha, papers/000 §4.1) exist;
  ``facility_location_hybrid`` needs at least :data:`MIN_HYBRID_REFERENCES` references with scores on
  every benchmark.
* job (``coreset``, queue ``gpu``): embed the missing texts (``evalplan.embeddings``), tune alpha on the
  references' scores when asked, select with ``evalplan.core.selection`` (a fraction budget selects each
  benchmark on its own and merges the orders), persist the ranked items. Whenever reference scores
  exist (the coreset's references, else every model with scores on its benchmarks), the diagnostics
  carry ``vs_random`` (``evalplan.core.backtest.vs_random``: this method's backtested RMSE on the references --
  cross-fitted when the selection used their scores -- against random coresets of the same size) and
  a ``recommendation``; without any, a warning.
* predict: ``evalplan.core.coresets.prediction.estimate_from_coreset`` (means with finite-population intervals);
  ``extrapolation`` when the target's coreset mean leaves the references' range on some benchmark.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from evalplan.benchmarks.score_matrix import load_matrix
from evalplan.benchmarks.service import score_range
from evalplan.core.backtest.vs_random import compare_to_random, crossfit_errors, overall_errors, recommendation
from evalplan.core.coresets.intervals import extrapolation_flag
from evalplan.core.coresets.prediction import estimate_from_coreset
from evalplan.core.selection import REFERENCE_TEXT_METHODS, TEXT_METHODS, TextSelector
from evalplan.core.selection.facility_location import sparsity_t
from evalplan.core.selection.hybrid import item_difficulty
from evalplan.core.selection.tuning import DEFAULT_GRID, tune_alpha
from evalplan.coresets.budget import plan_budget
from evalplan.coresets.curation import frozen_state
from evalplan.coresets.families.base import CoresetRequest, SelectionPlan, TargetScores
from evalplan.coresets.repository import (
    benchmarks_by_ids,
    coreset_item_scores,
    item_counts,
    load_for_job,
    model_names_scored_on,
    reference_model_ids,
    save_selection,
    scored_model_names,
    text_item_counts,
)
from evalplan.db.models import Benchmark, Coreset
from evalplan.embeddings.repository import (
    benchmark_texts,
    cached_embeddings,
    load_embeddings,
    no_text_error,
    resolve_benchmarks,
)
from evalplan.embeddings.service import ensure_embeddings, missing_embedding_package, needs_worker_extra
from evalplan.kit.errors import ErrorCollector, InvalidInput
from evalplan.kit.jobs import JobContext
from evalplan.kit.settings import get_settings
from evalplan.kit.validation import check_selector_params, json_safe
from evalplan.models.service import get_reference_models

#: methods that use only the items' benchmark labels, never their embeddings (papers/000 §4.2 baselines)
NO_EMBEDDING_METHODS = ("random", "stratified_random")
STRATIFIED_BY_DEFAULT = {"facility_location": True, "stratified_random": True, "facility_location_hybrid": True}
ALL_TEXT_METHODS: dict[str, type[TextSelector]] = {**TEXT_METHODS, **REFERENCE_TEXT_METHODS}
MIN_HYBRID_REFERENCES = 3  # the vs_random backtest cross-fits the strata on 3 folds of the references
NO_REFERENCES_WARNING = (
    "no reference scores: this coreset's error against random selection cannot be estimated. On a single "
    "benchmark, text coresets did not beat random selection in backtests (docs/RESULTS.md); upload some "
    "models' scores and name them as reference_models, or use method random, whose interval is valid for "
    "the simple random sample it is")
MAX_GRAPH_ENTRIES = 50_000_000  # ~600 MB of CSR (float32 + int32 indices) per candidate graph
EXTRAPOLATION_TOLERANCE = 1e-12  # coreset means within this of the references' range are inside it


class TextFamily:
    """Text-only methods on item-text embeddings (papers/000 §3.1 and the §4.2 baselines)."""

    name = "text"
    methods = tuple(ALL_TEXT_METHODS)
    job_kind = "coreset"
    queue = "gpu"
    default_level = 0.95

    def check_params(self, method: str, params: dict[str, Any], seed: int, *,
                     field: str = "params") -> dict[str, Any]:
        return check_selector_params(ALL_TEXT_METHODS[method], params, seed, method=method, field=field)

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
        check_embedder_installed(session, request, benchmarks)
        sizes = [counts[b.id][1] for b in benchmarks]
        stratified = bool(request.params.get("stratify", STRATIFIED_BY_DEFAULT.get(request.method, False)))
        plan = plan_budget(request.budget, sizes, [b.name for b in benchmarks], stratified)
        references = request.reference_models
        if references is not None and references != "all":
            references = [m.name for m in get_reference_models(session, references)]
        if request.method in REFERENCE_TEXT_METHODS:
            check_hybrid_references(session, request.method, benchmarks, references)
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
            sizes, means = item_counts(session, list(benchmarks)), reference_means(session, coreset)
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
        return {"n_items": item_counts(session, list(coreset.benchmark_ids)),
                "reference_means": reference_means(session, coreset)}


TEXT = TextFamily()


# --------------------------------------------------------------------------- validation


def check_hybrid_references(session: Session, method: str, benchmarks: list[Benchmark],
                            references: list[str] | str | None) -> None:
    """422 unless at least :data:`MIN_HYBRID_REFERENCES` of the references have scores on every benchmark."""
    if references is None:
        raise InvalidInput(
            f"method {method!r} stratifies by the reference models' item difficulty: it needs reference_models "
            f"(a list of model names or \"all\"), at least {MIN_HYBRID_REFERENCES} with scores on every benchmark",
            [{"field": "reference_models", "detail": f"at least {MIN_HYBRID_REFERENCES} models"}])
    errors = ErrorCollector()
    for b in benchmarks:
        having = scored_model_names(session, b.id)
        found = len(having) if references == "all" else len(having & set(references))
        if found < MIN_HYBRID_REFERENCES:
            errors.add(f"benchmark {b.name!r} has scores of {found} of the reference models; {method!r} needs at "
                       f"least {MIN_HYBRID_REFERENCES}", field="reference_models", benchmark=b.name, found=found)
    errors.raise_if_any("reference models without scores")


def check_embedder_installed(session: Session, request: CoresetRequest, benchmarks: list[Benchmark]) -> None:
    """Embedded mode (jobs in this process): 422 naming the ``[worker]`` extra when ``request.method`` needs
    embeddings that are not cached and the packages that compute them are missing (a base install)."""
    model_name = str(request.embedding_model)
    if request.method in NO_EMBEDDING_METHODS or get_settings().uses_celery:
        return
    package = missing_embedding_package(model_name)
    if package is None:
        return
    hashes = [h for b in benchmarks for h in benchmark_texts(session, b).hashes]
    if len(cached_embeddings(session, hashes, model_name)) < len(set(hashes)):
        raise needs_worker_extra(model_name, package, field="method")


def text_items(session: Session, benchmark_ids: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(item_pks, labels, X)`` of the items with text, in :func:`load_embeddings`' order (benchmark by benchmark,
    items by pk), for the methods that use only the benchmark labels: ``X`` is a placeholder column of zeros."""
    per_benchmark = [benchmark_texts(session, b) for b in resolve_benchmarks(session, benchmark_ids)]
    for bt in per_benchmark:
        if not bt.item_pks:
            raise no_text_error(bt.name, bt.n_without_text)
    item_pks = np.array([pk for bt in per_benchmark for pk in bt.item_pks], dtype=np.int64)
    labels = np.concatenate([np.full(len(bt.item_pks), b, dtype=np.int32) for b, bt in enumerate(per_benchmark)])
    return item_pks, labels, np.zeros((len(item_pks), 1), dtype=np.float32)


# --------------------------------------------------------------------------- the job


def reference_matrix(session: Session, benchmarks: list[Benchmark], item_pks: np.ndarray,
                     references: list[str] | str) -> tuple[list[str], np.ndarray]:
    """Scores (models x items, NaN = missing) of the reference models on the given items."""
    if references == "all":
        names = sorted(model_names_scored_on(session, [b.id for b in benchmarks]))
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


def _fit(cls: type[TextSelector], k: int, seed: int, params: dict[str, Any], embeddings: np.ndarray,
         labels: np.ndarray, difficulty: np.ndarray | None) -> TextSelector:
    selector = cls(k=k, seed=seed, **params)
    if difficulty is None:
        return selector.fit(embeddings, labels)
    return selector.fit(embeddings, labels, difficulty=difficulty)  # type: ignore[call-arg]


def _select(method: str, params: dict[str, Any], seed: int, k: int, embeddings: np.ndarray, labels: np.ndarray,
            per_benchmark: list[int] | None, difficulty: np.ndarray | None = None,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, dict[str, Any]]:
    """Fit the method; a fraction budget selects each benchmark on its own and merges the orders.
    ``difficulty`` (each item's mean reference score) goes to the methods that need it."""
    cls = ALL_TEXT_METHODS[method]
    if method not in REFERENCE_TEXT_METHODS:
        difficulty = None
    elif difficulty is None:
        raise ValueError(f"{method} needs the items' difficulty")
    if per_benchmark is None:
        fitted = _fit(cls, k, seed, params, embeddings, labels, difficulty)
        weights = getattr(fitted, "weights_", None)
        one: dict[str, Any] = {"objective": float(fitted.objective_)} if hasattr(fitted, "objective_") else {}
        if hasattr(fitted, "groups_"):
            one["strata"] = fitted.groups_
        return np.asarray(fitted.ranking_), np.asarray(fitted.gains_, dtype=float), weights, one
    picks: list[tuple[float, float, int, float, float | None]] = []
    objective = 0.0
    groups: list[dict[str, Any]] = []
    for b, k_b in enumerate(per_benchmark):
        rows = np.flatnonzero(labels == b)
        fitted = _fit(cls, k_b, seed, params, embeddings[rows], np.zeros(len(rows), dtype=np.int64),
                      None if difficulty is None else difficulty[rows])
        objective += float(getattr(fitted, "objective_", 0.0))
        groups += [{**g, "benchmark": b} for g in getattr(fitted, "groups_", [])]
        weights = getattr(fitted, "weights_", None)
        for r, (row, gain) in enumerate(zip(fitted.ranking_, fitted.gains_)):
            # facility location: one objective over all blocks, so order by gain; others: proportional interleave
            key = -float(gain) if method == "facility_location" else (r + 1) / k_b
            picks.append((key, b, int(rows[row]), float(gain), None if weights is None else float(weights[r])))
    picks.sort(key=lambda p: (p[0], p[1]))
    ranking = np.array([p[2] for p in picks])
    gains = np.array([p[3] for p in picks])
    weights_arr = None if picks and picks[0][4] is None else np.array([p[4] for p in picks])
    extra: dict[str, Any] = {"objective": objective} if method == "facility_location" else {}
    if groups:
        extra["strata"] = groups
    return ranking, gains, weights_arr, extra


def _tuned_alpha(embeddings: np.ndarray, labels: np.ndarray, k: int, calibration: np.ndarray,
                 capabilities: list[str], params: dict[str, Any]) -> tuple[float, list[dict[str, Any]]]:
    return tune_alpha(embeddings, labels, k, calibration, capabilities, grid=alpha_grid(len(labels), k),
                      stratify=params.get("stratify", True))


def vs_random_diagnostics(method: str, params: dict[str, Any], seed: int, k: int, embeddings: np.ndarray,
                          labels: np.ndarray, per_benchmark: list[int] | None, ranking: np.ndarray,
                          names: list[str], Y: np.ndarray, capabilities: list[str], *, tuned: bool,
                          explicit_references: bool) -> dict[str, Any]:
    """``vs_random`` of the coreset ``ranking`` on the references' scores ``Y`` (``evalplan.core.backtest.vs_random``).

    A selection that used the references (the hybrid's strata, a tuned alpha) is replayed on folds: the
    strata or alpha come from the other folds' scores and the held-out fold scores the result."""
    n_benchmarks = len(capabilities)
    counts = np.bincount(labels[ranking], minlength=n_benchmarks)
    uses_references = method in REFERENCE_TEXT_METHODS or tuned
    cross_fitted = uses_references and len(names) >= 2
    if cross_fitted:
        def replay(train: np.ndarray) -> np.ndarray:
            fold_params = dict(params)
            difficulty = None
            if method in REFERENCE_TEXT_METHODS:
                difficulty = item_difficulty(Y[train])
            else:
                fold_params["alpha"], _ = _tuned_alpha(embeddings, labels, k, Y[train], capabilities, params)
            return _select(method, fold_params, seed, k, embeddings, labels, per_benchmark, difficulty)[0]

        errors = crossfit_errors(replay, Y, labels, n_benchmarks, seed=seed)
    else:
        errors = overall_errors(Y, labels, n_benchmarks, ranking)
    comparison = compare_to_random(errors, Y, labels, counts, seed=seed)
    return {
        **comparison,
        "reference_models": names if explicit_references else "all models with scores (the request named none)",
        "cross_fitted": cross_fitted,
        "in_sample": uses_references and not cross_fitted,
        "comparison": "random coresets with this coreset's items per benchmark",
        "recommendation": recommendation(method, comparison, n_benchmarks),
    }


def select_text_coreset(ctx: JobContext, coreset_id: str, k: int, per_benchmark: list[int] | None) -> dict[str, Any]:
    started = time.perf_counter()
    coreset = load_for_job(ctx, coreset_id)
    benchmark_ids = list(coreset.benchmark_ids)
    method, params, seed = coreset.method, dict(coreset.params or {}), coreset.seed
    references, model_name = coreset.reference_models, str(coreset.embedding_model)

    if method in NO_EMBEDDING_METHODS:
        embed_summary: dict[str, Any] = {"skipped": f"method {method!r} needs no embeddings"}
        with ctx.session_factory() as session:
            item_pks, labels, embeddings = text_items(session, benchmark_ids)
    else:
        embed_summary = ensure_embeddings(ctx.session_factory, benchmark_ids, model_name,
                                          progress=lambda f: ctx.progress(0.6 * f))
        with ctx.session_factory() as session:
            item_pks, labels, embeddings = load_embeddings(session, benchmark_ids, model_name)
    with ctx.session_factory() as session:
        benchmarks = benchmarks_by_ids(session, benchmark_ids)
        capabilities = [b.capability or b.name for b in benchmarks]
        # the backtest's references: the coreset's, else every model with scores on its benchmarks
        names, Y = reference_matrix(session, benchmarks, np.asarray(item_pks), references or "all")
    tuning = None
    tuned = method == "facility_location" and bool(references) and "alpha" not in params and len(names) > 0
    if tuned:
        best, table = _tuned_alpha(embeddings, labels, k, Y, capabilities, params)
        params["alpha"] = best
        tuning = {"reference_models": names, "grid": table, "alpha": best}
    difficulty = item_difficulty(Y) if method in REFERENCE_TEXT_METHODS else None
    ctx.progress(0.7)

    ranking, gains, weights, extra = _select(method, params, seed, k, embeddings, labels, per_benchmark, difficulty)
    ctx.progress(0.8)
    warnings: list[str] = []
    vs_random = None
    if len(names) > 0:
        vs_random = vs_random_diagnostics(method, params, seed, k, embeddings, labels, per_benchmark, ranking,
                                          names, Y, capabilities, tuned=tuned, explicit_references=bool(references))
        rec = vs_random["recommendation"]
        if rec["method"] != method:
            warnings.append(f"backtest on the reference models: {rec['reason']}")
    elif method not in NO_EMBEDDING_METHODS:
        warnings.append(NO_REFERENCES_WARNING)
    ctx.progress(0.9)
    item_pks_arr = np.asarray(item_pks)
    rows = [{
        "coreset_id": coreset_id, "rank": r + 1, "item_pk": int(item_pks_arr[i]),
        "benchmark_id": benchmark_ids[int(labels[i])],
        "gain": float(g) if np.isfinite(g) else None,
        "weight": None if weights is None else float(weights[r]),
    } for r, (i, g) in enumerate(zip(ranking.tolist(), gains.tolist()))]
    per_bench = {benchmark_ids[b]: int(np.sum(labels[ranking] == b)) for b in range(len(benchmark_ids))}
    if "strata" in extra:
        extra["strata"] = [{**g, "benchmark": benchmarks[g["benchmark"]].name} for g in extra["strata"]]
    diagnostics = json_safe({
        **extra, "k": k, "per_benchmark": per_bench, "embeddings": embed_summary, "alpha_tuning": tuning,
        "vs_random": vs_random, "recommendation": None if vs_random is None else vs_random["recommendation"],
        "warnings": warnings, "seconds": round(time.perf_counter() - started, 3),
    })
    save_selection(ctx, coreset_id, rows, diagnostics, params)
    return {"coreset_id": coreset_id, "n_items": len(rows), **{k_: v for k_, v in diagnostics.items()
                                                               if k_ not in ("embeddings", "strata")}}


# --------------------------------------------------------------------------- predict


def reference_means(session: Session, coreset: Coreset) -> dict[str, list[float]]:
    """Per benchmark id, each reference model's mean score (default metric) on the coreset's items
    there, from the stored scores now (empty without reference models)."""
    if not coreset.reference_models:
        return {}
    model_ids = reference_model_ids(session, coreset.reference_models)
    rows = coreset_item_scores(session, coreset.id, model_ids)
    sums: dict[tuple[str, str], list[float]] = {}
    for model_id, benchmark_id, value in rows:
        sums.setdefault((model_id, benchmark_id), []).append(float(value))
    means: dict[str, list[float]] = {}
    for (_model, benchmark_id), values in sorted(sums.items()):
        means.setdefault(benchmark_id, []).append(float(np.mean(values)))
    return means


def outside_references(by_benchmark: dict[str, list[float]], means: dict[str, list[float]]) -> bool:
    """True when, on some benchmark, the target's coreset mean lies outside the reference models'
    coreset means (``evalplan.core.coresets.intervals.extrapolation_flag``, the rule of docs/DECISIONS.md)."""
    for benchmark_id, target_values in by_benchmark.items():
        ref = means.get(benchmark_id) or []
        if ref and extrapolation_flag(float(np.mean(target_values)), np.asarray(ref),
                                      tolerance=EXTRAPOLATION_TOLERANCE):
            return True
    return False
