"""Budget plans (issue 16 §4): validate ``POST /v1/plans`` against the database synchronously (422 /
404 before any job exists), then a ``plan`` job (queue ``cpu``, :mod:`evalplan.plans.tasks`) runs
:func:`evalplan.core.backtest.planner.plan_benchmark` on each benchmark's reference matrix."""

from __future__ import annotations

import math

from sqlalchemy.orm import Session

from evalplan.benchmarks.repository import item_count
from evalplan.benchmarks.service import get_benchmarks
from evalplan.core.backtest.planner import (
    DEFAULT_CANDIDATES,
    min_references,
    parse_candidate,
)
from evalplan.core.backtest.session_planner import MAX_SESSION_TARGETS
from evalplan.coresets.families.score_based import SCORE_BASED, auto_min_references
from evalplan.coresets.repository import scored_model_names
from evalplan.db.models import Benchmark, Job
from evalplan.kit.errors import ErrorCollector
from evalplan.kit.jobs import create_job
from evalplan.models.service import get_reference_models
from evalplan.plans.schemas import PlanCreate

KIND = "plan"
MAX_SEEDS = 10


def parse_candidates(methods: list[str] | None, errors: ErrorCollector) -> list[tuple[str, str]]:
    """``"method"`` or ``"method:predictor"`` entries -> (method, predictor) pairs (errors at ``methods.i``)."""
    if methods is None:
        return [(c.method, c.predictor) for c in DEFAULT_CANDIDATES]
    if not methods:
        errors.add("methods must not be empty", field="methods")
    out: list[tuple[str, str]] = []
    for i, entry in enumerate(methods):
        try:
            cand = parse_candidate(entry)
        except ValueError as exc:
            errors.add(str(exc), field=f"methods.{i}")
            continue
        if (cand.method, cand.predictor) in out:
            errors.add(f"{cand.method}:{cand.predictor} is listed twice", field=f"methods.{i}")
            continue
        out.append((cand.method, cand.predictor))
    return out


def _models_with_scores(session: Session, benchmark: Benchmark) -> set[str]:
    return scored_model_names(session, benchmark.id)


def create_plan(session: Session, body: PlanCreate) -> Job:
    """Validate ``body`` and add the queued ``plan`` job (nothing is stored on a 4xx)."""
    errors = ErrorCollector()
    if not (math.isfinite(body.half_width) and body.half_width > 0):
        errors.add(f"half_width must be a positive number of score units, got {body.half_width!r}",
                   field="half_width")
    if not (math.isfinite(body.level) and 0.0 < body.level < 1.0):
        errors.add(f"level must be in (0, 1), got {body.level!r}", field="level")
    candidates = parse_candidates(body.methods, errors)
    for i, fraction in enumerate(body.budgets or []):
        if not (math.isfinite(fraction) and 0.0 < fraction < 1.0):
            errors.add(f"a budget is a fraction of the benchmark in (0, 1), got {fraction!r}", field=f"budgets.{i}")
    if body.budgets is not None and not body.budgets:
        errors.add("budgets must not be empty", field="budgets")
    if body.budgets and len(set(body.budgets)) != len(body.budgets):
        errors.add("a budget is listed twice", field="budgets")
    if not 1 <= body.seeds <= MAX_SEEDS:
        errors.add(f"seeds must be in [1, {MAX_SEEDS}], got {body.seeds}", field="seeds")
    if body.max_seconds is not None and not (math.isfinite(body.max_seconds) and body.max_seconds > 0):
        errors.add(f"max_seconds must be > 0, got {body.max_seconds!r}", field="max_seconds")
    if not 0 <= body.session_targets <= MAX_SESSION_TARGETS:
        errors.add(f"session_targets must be in [0, {MAX_SESSION_TARGETS}], got {body.session_targets}",
                   field="session_targets")
    if body.cost_per_item is not None and not (math.isfinite(body.cost_per_item) and body.cost_per_item > 0):
        errors.add(f"cost_per_item must be a positive number, got {body.cost_per_item!r}", field="cost_per_item")
    methods = {m for m, _ in candidates}
    method_params = SCORE_BASED.check_method_params(body.params, methods, errors, not_listed="not a candidate",
                                                    title="invalid plan request")

    refs = [body.benchmarks] if isinstance(body.benchmarks, str) else list(body.benchmarks)
    benchmarks = get_benchmarks(session, refs)  # 404 for an unknown one
    named = None if body.reference_models == "all" else [m.name for m in
                                                         get_reference_models(session, body.reference_models)]
    need = min_references(body.level)
    entries = []
    for i, b in enumerate(benchmarks):
        loc = "benchmarks" if isinstance(body.benchmarks, str) else f"benchmarks.{i}"
        n_items = item_count(session, b.id)
        if n_items < 3:
            errors.add(f"benchmark {b.name!r} has {n_items} items; a plan needs at least 3", field=loc,
                       benchmark=b.name)
        having = _models_with_scores(session, b)
        if named is None:
            names = sorted(having)
        else:
            for n in named:
                if n not in having:
                    errors.add(f"reference model {n!r} has no scores on benchmark {b.name!r}",
                               field="reference_models", model=n, benchmark=b.name)
            names = sorted(n for n in named if n in having)
        if len(names) < need:
            errors.add(f"benchmark {b.name!r}: {len(names)} reference models with scores; a {body.level:g} interval "
                       f"needs at least {need} (ceil((M + 1) level) <= M)", field="reference_models",
                       benchmark=b.name, found=len(names))
        if "auto" in methods and len(names) < auto_min_references(dict((body.params or {}).get("auto") or {})):
            errors.add(f"benchmark {b.name!r}: {len(names)} reference models with scores; method auto needs at least "
                       f"{auto_min_references(dict((body.params or {}).get('auto') or {}))} (two per outer fold)",
                       field="reference_models", benchmark=b.name, found=len(names))
        outside = (b.score_min is not None and b.score_min < 0) or (b.score_max is not None and b.score_max > 1)
        if "irt" in methods and outside:
            errors.add(f"irt needs scores in [0, 1]; benchmark {b.name!r} scores lie in "
                       f"[{b.score_min}, {b.score_max}]", field=loc, benchmark=b.name)
        entries.append({"id": b.id, "name": b.name, "metric": b.default_metric, "references": names})
    errors.raise_if_any("the benchmarks cannot be planned with this request")
    payload = {"benchmarks": entries, "half_width": float(body.half_width), "level": float(body.level),
               "candidates": [list(c) for c in candidates], "budgets": body.budgets, "seeds": body.seeds,
               "params": method_params, "max_seconds": body.max_seconds,
               "cost_per_item": body.cost_per_item, "session_targets": body.session_targets}
    return create_job(session, KIND, payload, benchmark_id=benchmarks[0].id if len(benchmarks) == 1 else None)
