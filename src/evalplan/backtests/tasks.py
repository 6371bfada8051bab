"""The ``backtest`` job (queue ``cpu``): load each benchmark's matrix and replay coresets + predictors.

Per (benchmark, method) ``evalplan.core.backtest.backtest.run_backtest`` (the rows equal one call with every
method: splits and selectors depend only on the seed); with ``suite`` the benchmarks as ONE
multi-benchmark coreset (``evalplan.core.backtest.suite_backtest``). NaN metrics are stored as null.
"""

from __future__ import annotations

from typing import Any

from evalplan.backtests.service import COLUMNS, KIND, UNAVAILABLE
from evalplan.benchmarks.scores import matrix_for
from evalplan.benchmarks.service import get_benchmark
from evalplan.core.backtest.backtest import run_backtest
from evalplan.core.backtest.suite_backtest import run_suite_backtest
from evalplan.kit.errors import InvalidInput
from evalplan.kit.jobs import JobContext, register
from evalplan.kit.validation import json_safe


def _run_suite(ctx: JobContext, p: dict[str, Any]) -> list[dict[str, Any]]:
    """The benchmarks as one multi-benchmark coreset (``evalplan.core.backtest.suite_backtest``), on the models
    scored on every benchmark (rows aligned by model)."""
    entries, methods = p["benchmarks"], p["methods"]
    with ctx.session_factory() as session:
        matrices = [matrix_for(session, get_benchmark(session, e["id"]), e["metric"]) for e in entries]
    shared = sorted(set.intersection(*(set(mx.model_ids) for mx in matrices)))
    mats = [mx.values[[mx.model_ids.index(m) for m in shared]] for mx in matrices]
    names = [e["name"] for e in entries]
    rows: list[dict[str, Any]] = []
    ctx.progress(0.05)
    for i, m in enumerate(methods):
        try:
            out = run_suite_backtest(mats, names, {m: p["predictors"][m]}, budgets=p["budgets"],
                                     n_reference=p["n_reference"], split=p["split"], seeds=p["seeds"],
                                     level=p["level"], method_params=p.get("params") or {},
                                     checkpoint=ctx.check_cancelled)
        except ValueError as exc:  # the data changed since the request, or a scale the core rejects
            raise InvalidInput(f"suite, method {m!r}: {exc}", [{"method": m, "detail": str(exc)}]) from None
        for r in out:
            row = {"benchmark": r["scope"], **r}
            rows.append({c: json_safe(row.get(c)) for c in COLUMNS})
        ctx.progress((i + 1) / len(methods))
    return rows


@register(KIND, queue="cpu")
def run_backtest_job(ctx: JobContext) -> dict[str, Any]:
    p = ctx.payload
    entries, methods = p["benchmarks"], p["methods"]
    if p.get("suite"):
        return {"rows": _run_suite(ctx, p), "columns": COLUMNS, "unavailable": UNAVAILABLE,
                "metrics": {e["name"]: e["metric"] for e in entries}, "suite": True}
    steps, done = len(entries) * len(methods), 0
    rows: list[dict[str, Any]] = []
    for entry in entries:
        with ctx.session_factory() as session:
            benchmark = get_benchmark(session, entry["id"])
            matrix = matrix_for(session, benchmark, entry["metric"])
        ctx.progress(done / steps + 0.05 / steps)
        for m in methods:
            try:
                out = run_backtest(matrix.values, [m], predictors={m: p["predictors"][m]}, budgets=p["budgets"],
                                   n_reference=p["n_reference"], split=p["split"], seeds=p["seeds"], level=p["level"],
                                   method_params=p.get("params") or {}, checkpoint=ctx.check_cancelled)
            except ValueError as exc:  # the data changed since the request, or a scale the core rejects
                raise InvalidInput(f"benchmark {entry['name']!r}, method {m!r}: {exc}",
                                   [{"benchmark": entry["name"], "method": m, "detail": str(exc)}]) from None
            for r in out:
                row = {"benchmark": entry["name"], **r}
                rows.append({c: json_safe(row.get(c)) for c in COLUMNS})
            done += 1
            ctx.progress(done / steps)
    return {"rows": rows, "columns": COLUMNS, "unavailable": UNAVAILABLE,
            "metrics": {e["name"]: e["metric"] for e in entries}}
