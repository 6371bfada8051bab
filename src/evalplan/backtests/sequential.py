"""Sequential backtests (``POST /v1/backtests`` with ``sequential: true``, issue 11 §4): validate the
request synchronously (422 / 404, nothing stored), then a ``sequential_backtest`` job (queue
``cpu``) replays held-out models of each benchmark as session targets for every requested session
method (:func:`evalplan.core.backtest.sequential_backtest.run_sequential_backtest`), one (benchmark, regime) at a
time with progress. Result: ``{sequential: true, rows, setups, targets, budgets, columns}``; a row is
one (benchmark, regime, method) with ``mae`` / ``rmse`` / ``coverage`` per budget and ``stops``
(per rule: ``mean_items``, ``median_items``, ``mean_fraction``, ``reached``, ``coverage_at_stop``,
``mae_at_stop``). NaN is stored as null.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy.orm import Session

from evalplan.backtests.schemas import BacktestCreate
from evalplan.benchmarks.scores import check_metric, matrix_for
from evalplan.benchmarks.service import get_benchmark, get_benchmarks, score_range
from evalplan.core.backtest.sequential_backtest import REGIMES, run_sequential_backtest, session_estimators
from evalplan.core.sequential.stopping import StopRule, check_level, resolve_max_items
from evalplan.db.models import Job
from evalplan.kit.errors import ErrorCollector, InvalidInput
from evalplan.kit.jobs import JobContext, create_job, register
from evalplan.kit.validation import json_safe

KIND = "sequential_backtest"
STATIC_ONLY = ("predictors", "n_reference", "split", "seeds", "params", "suite")
SEQUENTIAL_ONLY = ("stop", "regimes", "n_targets", "reference_cap", "max_items", "seed")
DEFAULT_BUDGETS = [25, 50, 100, 200]
MAX_TARGETS = 200
COLUMNS = ["benchmark", "regime", "method", "n_targets", "mae", "rmse", "coverage", "stops", "seconds"]


def _rules(given: Any, errors: ErrorCollector) -> list[StopRule]:
    if given is None:
        return [StopRule(half_width=0.02)]
    entries = given if isinstance(given, list) else [given]
    if not entries:
        errors.add("give at least one rule", field="stop")
    rules = []
    for k, entry in enumerate(entries):
        where = f"stop.{k}" if isinstance(given, list) else "stop"
        try:
            rules.append(StopRule.from_dict(entry))
        except ValueError as exc:
            message = str(exc)
            head = message.split(":", 1)[0]
            errors.add(message, field=where + head[len("stop"):] if head.startswith("stop") else where)
    return rules


def create_sequential_backtest(session: Session, body: BacktestCreate) -> Job:
    """Validate a ``sequential: true`` request and add the queued job."""
    errors = ErrorCollector()
    given = body.model_fields_set
    for name in STATIC_ONLY:
        if name in given:
            errors.add(f"{name} applies to coreset backtests, not to sequential: true", field=name)
    table = session_estimators()
    methods = list(body.methods) if body.methods is not None else list(table)
    for i, m in enumerate(methods):
        if m not in table:
            errors.add(f"unknown session method {m!r}; one of {list(table)}", field=f"methods.{i}")
    if len(set(methods)) != len(methods):
        errors.add("a method is listed twice", field="methods")
    budgets: list[int] = DEFAULT_BUDGETS if "budgets" not in given else []
    for i, n in enumerate(body.budgets if "budgets" in given else []):
        if not (float(n).is_integer() and n >= 1):
            errors.add(f"a sequential budget is a number of items >= 1, got {n!r}", field=f"budgets.{i}")
        else:
            budgets.append(int(n))
    if len(set(budgets)) != len(budgets):
        errors.add("a budget is listed twice", field="budgets")
    level = 0.95 if "level" not in given else body.level
    try:
        check_level(level)
    except ValueError as exc:
        errors.add(str(exc), field="level")
    rules = _rules(body.stop, errors)
    for k, rule in enumerate(rules):
        if not rule.anytime_valid and rule.level != level:
            errors.add(f"a stop rule's level ({rule.level}) must equal the backtest's level ({level}) unless it is "
                       "anytime_valid (the interval is replayed from the same sessions)",
                       field=f"stop.{k}.level" if isinstance(body.stop, list) else "stop.level")
    regimes = list(body.regimes) if body.regimes is not None else ["interpolation"]
    for i, r in enumerate(regimes):
        if r not in REGIMES:
            errors.add(f"unknown regime {r!r}; one of {list(REGIMES)}", field=f"regimes.{i}")
    if not regimes or len(set(regimes)) != len(regimes):
        errors.add("give distinct regimes", field="regimes")
    n_targets = 20 if body.n_targets is None else body.n_targets
    if not 1 <= n_targets <= MAX_TARGETS:
        errors.add(f"n_targets must be in [1, {MAX_TARGETS}], got {n_targets}", field="n_targets")
    ref_cap = 100 if body.reference_cap is None else body.reference_cap
    if ref_cap < 2:
        errors.add(f"reference_cap must be >= 2, got {ref_cap}", field="reference_cap")
    seed = 0 if body.seed is None else body.seed
    if seed < 0:
        errors.add(f"seed must be >= 0, got {seed}", field="seed")
    metric = check_metric(body.metric) if body.metric is not None else None
    errors.raise_if_any("invalid sequential backtest request")

    refs = [body.benchmarks] if isinstance(body.benchmarks, str) else list(body.benchmarks)
    benchmarks = get_benchmarks(session, refs)  # 404 for an unknown one
    entries = []
    for i, b in enumerate(benchmarks):
        loc = "benchmarks" if isinstance(body.benchmarks, str) else f"benchmarks.{i}"
        bm = metric or b.default_metric
        matrix = matrix_for(session, b, bm)
        n_models, n_items = len(matrix.model_ids), len(matrix.item_pks)
        try:
            max_items = resolve_max_items(body.max_items, n_items) if n_items else None
        except ValueError as exc:
            message = str(exc)
            errors.add(message, field=message.split(":", 1)[0])
            max_items = None
        if n_items < 2:
            errors.add(f"benchmark {b.name!r} has {n_items} scored items; a sequential backtest needs 2",
                       field=loc, benchmark=b.name)
        for regime in regimes:
            gap = int(round(0.2 * n_models)) if regime == "extrapolation" else 0
            if n_targets + gap > n_models - 2:
                errors.add(f"{regime} on {b.name!r} ({n_models} models, {gap} in the gap) leaves fewer than 2 "
                           f"references with n_targets={n_targets}; at most {max(n_models - 2 - gap, 0)}",
                           field="n_targets", benchmark=b.name)
        lo, hi = score_range(b, infinite=True)
        if any(r.anytime_valid for r in rules) and not (math.isfinite(lo) and math.isfinite(hi)):
            errors.add(f"anytime_valid needs a bounded score range; {b.name!r} is unbounded", field="stop",
                       benchmark=b.name)
        entries.append({"id": b.id, "name": b.name, "metric": bm, "max_items": max_items})
    errors.raise_if_any("the benchmarks cannot be backtested with this request")
    payload = {"benchmarks": entries, "methods": methods, "budgets": sorted(budgets), "level": level,
               "stop": [r.as_dict() for r in rules], "regimes": regimes, "n_targets": n_targets,
               "reference_cap": ref_cap, "seed": seed}
    return create_job(session, KIND, payload, benchmark_id=benchmarks[0].id if len(benchmarks) == 1 else None)


@register(KIND, queue="cpu")
def run_sequential_backtest_job(ctx: JobContext) -> dict[str, Any]:
    p = ctx.payload
    table = session_estimators()
    estimators = {m: table[m] for m in p["methods"]}
    rules = [StopRule.from_dict(r) for r in p["stop"]]
    steps = [(e, regime) for e in p["benchmarks"] for regime in p["regimes"]]
    rows: list[dict[str, Any]] = []
    setups: list[dict[str, Any]] = []
    targets: list[dict[str, Any]] = []
    for k, (entry, regime) in enumerate(steps):
        with ctx.session_factory() as session:
            benchmark = get_benchmark(session, entry["id"])
            matrix = matrix_for(session, benchmark, entry["metric"])
            scores_range = score_range(benchmark, infinite=True)
        names = matrix.model_names

        def progress(f: float, k: int = k) -> None:
            ctx.progress(min(1.0, (k + f) / len(steps)))

        try:
            out = run_sequential_backtest(matrix.values, estimators, regime=regime, n_targets=p["n_targets"],
                                          budgets=p["budgets"], stops=rules, level=p["level"],
                                          max_items=entry["max_items"], ref_cap=p["reference_cap"], seed=p["seed"],
                                          score_range=scores_range, progress=progress)
        except ValueError as exc:  # the data changed since the request
            raise InvalidInput(f"benchmark {entry['name']!r}, {regime}: {exc}",
                               [{"benchmark": entry["name"], "regime": regime, "detail": str(exc)}]) from None
        tag = {"benchmark": entry["name"], "regime": regime}
        rows += [json_safe({**tag, **r}) for r in out["rows"]]
        setups.append(json_safe({**tag, **out["setup"]}))
        targets += [json_safe({**tag, **t, "target": names[t["target"]]}) for t in out["targets"]]
        ctx.progress((k + 1) / len(steps))
    return {"sequential": True, "rows": rows, "setups": setups, "targets": targets, "budgets": p["budgets"],
            "stop": p["stop"], "columns": COLUMNS}
