"""Backtests of score-based coresets + predictors over stored benchmarks (papers/002 §3, App. L.1).

The science is :func:`evalplan.core.backtest.backtest.run_backtest`; this module validates a request against the
database synchronously (422 / 404 before any job exists), then a ``backtest`` job (queue ``cpu``)
loads each benchmark's models x items matrix, runs the backtest per (benchmark, method) -- the
rows equal one call with every method, since splits and selectors depend only on the seed -- and
stores ``{"rows", "columns", "unavailable"}`` as the job result. NaN metrics are stored as null.

With ``suite: true`` the benchmarks form ONE multi-benchmark coreset
(:func:`evalplan.core.backtest.suite_backtest.run_suite_backtest`): the models scored on every benchmark, shared
references, each budget a total split over the benchmarks; rows per benchmark plus one row with
``benchmark = "overall"`` per (method, predictor, budget, seed).

``unavailable`` says when a column is null (Agreement for predictors without item-level
predictions, coverage for the IRT predictors; in a suite Agreement and stability are not computed).
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy.orm import Session

from evalplan.backtests.schemas import BacktestCreate
from evalplan.backtests.sequential import create_sequential_backtest
from evalplan.benchmarks.repository import item_count
from evalplan.benchmarks.score_matrix import models_with_scores
from evalplan.benchmarks.scores import check_metric
from evalplan.benchmarks.service import get_benchmarks
from evalplan.core.backtest.backtest import BACKTEST_PREDICTORS, DEFAULT_PREDICTOR, SPLITS
from evalplan.coresets.families.score_based import SCORE_BASED
from evalplan.coresets.registry import BACKTEST_METHODS
from evalplan.db.models import Benchmark, Job
from evalplan.kit.errors import ErrorCollector
from evalplan.kit.jobs import create_job

KIND = "backtest"
MIN_REFERENCE = 3
MAX_SEEDS = 20
EXTRAPOLATION_POOL = 0.5  # references from the bottom 50% (evalplan.core.backtest.backtest.split_models)
COLUMNS = ["benchmark", "method", "predictor", "label", "split", "budget", "k", "seed", "n_reference",
           "n_test", "rmse", "mae", "spearman", "kendall", "agreement", "stability", "coverage", "interval_width",
           "frac_flagged", "seconds"]
UNAVAILABLE = {"agreement": "item-level Agreement (003 App. C.1) is null for predictors without item-level "
                            "predictions (mean, aipw, guard) and for non-binary scores",
               "coverage": "null for gp_irt / p_irt (no leave-one-reference-out interval)"}
IRT_PREDICTORS = ("gp_irt", "p_irt")
SEQUENTIAL_ONLY = ("stop", "regimes", "n_targets", "reference_cap", "max_items", "seed")


def _n_models(session: Session, benchmark: Benchmark, metric: str) -> int:
    """Models with at least one score for ``metric`` (the rows of ``load_matrix``)."""
    return len(models_with_scores(session, benchmark.id, metric))


def _n_shared_models(session: Session, benchmarks: list[Benchmark], metric: str | None) -> int:
    """Models with at least one score on every benchmark (each with its metric): a suite's rows."""
    shared: set[str] | None = None
    for b in benchmarks:
        ids = set(models_with_scores(session, b.id, metric or b.default_metric))
        shared = ids if shared is None else shared & ids
    return len(shared or ())


def _plan_predictors(methods: list[str], predictors: Any, errors: ErrorCollector) -> dict[str, list[str]]:
    if predictors is None:
        return {m: [DEFAULT_PREDICTOR.get(m, "kernel_ridge")] for m in methods}
    if isinstance(predictors, list):
        if not predictors:
            errors.add("predictors must not be empty", field="predictors")
        for i, p in enumerate(predictors):
            if p not in BACKTEST_PREDICTORS:
                errors.add(f"unknown predictor {p!r}; one of {list(BACKTEST_PREDICTORS)}", field=f"predictors.{i}")
        if len(set(predictors)) != len(predictors):
            errors.add("a predictor is listed twice", field="predictors")
        return {m: list(predictors) for m in methods}
    plan: dict[str, list[str]] = {}
    for m, value in predictors.items():
        if m not in methods:
            errors.add(f"predictors names method {m!r}, which is not in methods", field=f"predictors.{m}")
            continue
        names = [value] if isinstance(value, str) else list(value)
        if not names:
            errors.add("no predictor given", field=f"predictors.{m}")
        for p in names:
            if p not in BACKTEST_PREDICTORS:
                errors.add(f"unknown predictor {p!r}; one of {list(BACKTEST_PREDICTORS)}", field=f"predictors.{m}")
        if len(set(names)) != len(names):
            errors.add("a predictor is listed twice", field=f"predictors.{m}")
        plan[m] = names
    for m in methods:
        plan.setdefault(m, [DEFAULT_PREDICTOR.get(m, "kernel_ridge")])
    return plan


def create_backtest(session: Session, body: BacktestCreate) -> Job:
    """Validate ``body`` (a :class:`~evalplan.backtests.schemas.BacktestCreate`) and add the queued job
    (``sequential: true``: :func:`evalplan.backtests.sequential.create_sequential_backtest`)."""
    if body.sequential:
        return create_sequential_backtest(session, body)
    errors = ErrorCollector()
    for name in SEQUENTIAL_ONLY:
        if name in body.model_fields_set:
            errors.add(f"{name} applies to sequential backtests (sequential: true) only", field=name)
    if body.methods is None:
        errors.add("methods is required (the selectors to backtest)", field="methods")
    methods = list(body.methods or [])
    for i, m in enumerate(methods):
        if m not in BACKTEST_METHODS:
            errors.add(f"unknown method {m!r}; one of {list(BACKTEST_METHODS)}", field=f"methods.{i}")
    if len(set(methods)) != len(methods):
        errors.add("a method is listed twice", field="methods")
    plan = _plan_predictors(methods, body.predictors, errors)
    # method auto chooses its own predictor (evalplan.core.coresets.auto): predictor "auto", and only there
    for m in methods:
        if any((p == "auto") != (m == "auto") for p in plan.get(m, [])):
            errors.add("the auto predictor goes with method auto only, and method auto takes only it",
                       field=f"predictors.{m}" if isinstance(body.predictors, dict) else "predictors")
        if m == "auto" and body.suite:
            errors.add("method auto is not available in a suite backtest (its choice is per benchmark)",
                       field="methods")
    if body.split not in SPLITS:
        errors.add(f"unknown split {body.split!r}; one of {list(SPLITS)}", field="split")
    for i, fraction in enumerate(body.budgets):
        if not (math.isfinite(fraction) and 0.0 < fraction <= 1.0):
            errors.add(f"budget must be a fraction in (0, 1], got {fraction!r}", field=f"budgets.{i}")
    if len(set(body.budgets)) != len(body.budgets):
        errors.add("a budget is listed twice", field="budgets")
    if not 1 <= body.seeds <= MAX_SEEDS:
        errors.add(f"seeds must be in [1, {MAX_SEEDS}], got {body.seeds}", field="seeds")
    if body.n_reference < MIN_REFERENCE:
        errors.add(f"n_reference must be >= {MIN_REFERENCE}, got {body.n_reference}", field="n_reference")
    metric = check_metric(body.metric) if body.metric is not None else None
    method_params = SCORE_BASED.check_method_params(body.params, methods, errors, not_listed="not in methods",
                                                    title="invalid backtest request")

    refs = [body.benchmarks] if isinstance(body.benchmarks, str) else list(body.benchmarks)
    benchmarks = get_benchmarks(session, refs)  # 404 for an unknown one
    n = body.n_reference
    if body.suite:
        if len(benchmarks) < 2:
            errors.add("suite needs at least two benchmarks", field="suite")
        for m in methods:
            if "guard" in plan[m]:
                errors.add("the guard predictor is not available in a suite backtest", field=f"predictors.{m}")
    shared = _n_shared_models(session, benchmarks, metric) if body.suite else 0
    entries = []
    for i, b in enumerate(benchmarks):
        loc = "benchmarks" if isinstance(body.benchmarks, str) else f"benchmarks.{i}"
        bm = metric or b.default_metric
        n_items = item_count(session, b.id)
        n_models = shared if body.suite else _n_models(session, b, bm)
        if n_items == 0:
            errors.add(f"benchmark {b.name!r} has no items", field=loc, benchmark=b.name)
        if body.suite and i > 0:
            pass  # the shared-model checks below were made once, on the first benchmark
        elif n >= n_models:
            where = "scored on every benchmark of the suite" if body.suite else f"with {bm!r} scores on {b.name!r}"
            errors.add(f"n_reference={n} must be below the number of models {where} ({n_models})",
                       field="n_reference", benchmark=b.name)
        elif n_models < n + 2:
            errors.add(f"benchmark {b.name!r} has {n_models} models with {bm!r} scores; a backtest with "
                       f"n_reference={n} needs at least {n + 2}", field=loc, benchmark=b.name)
        elif body.split == "extrapolation" and n > math.floor(EXTRAPOLATION_POOL * n_models):
            errors.add(f"the extrapolation split draws references from the bottom 50% of the {n_models} "
                       f"models of {b.name!r}: n_reference must be <= {math.floor(EXTRAPOLATION_POOL * n_models)}",
                       field="n_reference", benchmark=b.name)
        needs_unit = any(m == "irt" or any(p in IRT_PREDICTORS for p in plan[m]) for m in methods)
        outside = (b.score_min is not None and b.score_min < 0) or (b.score_max is not None and b.score_max > 1)
        if needs_unit and outside:
            errors.add(f"irt / gp_irt / p_irt need scores in [0, 1]; benchmark {b.name!r} scores lie in "
                       f"[{b.score_min}, {b.score_max}]", field=loc, benchmark=b.name)
        entries.append({"id": b.id, "name": b.name, "metric": bm})
    errors.raise_if_any("the benchmarks cannot be backtested with this request")

    payload = {"benchmarks": entries, "methods": methods, "predictors": plan,
               "budgets": [float(x) for x in body.budgets],
               "n_reference": n, "split": body.split, "seeds": body.seeds, "level": body.level,
               "suite": bool(body.suite), "params": method_params}
    return create_job(session, KIND, payload, benchmark_id=benchmarks[0].id if len(benchmarks) == 1 else None)
