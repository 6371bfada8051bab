"""The ``plan`` job (queue ``cpu``): per benchmark, the references' score matrix,
:func:`evalplan.core.backtest.planner.plan_benchmark` (the smallest static coreset) and, unless
``session_targets`` is 0, :func:`evalplan.core.backtest.session_planner.plan_session` (the items the default
session and ``random`` need on held-out references); then the suite totals
(:func:`evalplan.core.backtest.planner.plan_suite`, ``suite.session``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from evalplan.benchmarks.score_matrix import load_matrix
from evalplan.benchmarks.service import get_benchmark, score_range
from evalplan.core.backtest.planner import DEFAULT_FRACTIONS, Candidate, plan_benchmark, plan_suite
from evalplan.core.backtest.session_planner import plan_session, suite_session_items
from evalplan.kit.errors import InvalidInput
from evalplan.kit.jobs import JobContext, register
from evalplan.kit.validation import json_safe
from evalplan.plans.plots import savings_of
from evalplan.plans.service import KIND


@register(KIND, queue="cpu")
def run_plan_job(ctx: JobContext) -> dict[str, Any]:
    p = ctx.payload
    candidates = [Candidate(m, pred) for m, pred in p["candidates"]]
    fractions = p.get("budgets") or DEFAULT_FRACTIONS
    plans: dict[str, dict[str, Any]] = {}
    entries = p["benchmarks"]
    n_sessions = int(p.get("session_targets", 0))  # jobs queued before the session block: none
    static_share = 0.6 if n_sessions else 1.0  # of each benchmark's progress: the static search, then sessions
    for i, entry in enumerate(entries):
        with ctx.session_factory() as session:
            benchmark = get_benchmark(session, entry["id"])
            matrix = load_matrix(session, benchmark, entry["metric"])
            scale = score_range(benchmark)
            bounds = score_range(benchmark, infinite=True)
        rows = [r for r, n in enumerate(matrix.model_names) if n in set(entry["references"])]
        Y = np.asarray(matrix.values)[rows]
        def step(fraction: float, i: int = i) -> None:
            ctx.progress((i + static_share * fraction) / len(entries))

        def session_step(fraction: float, i: int = i) -> None:
            ctx.progress((i + static_share + (1.0 - static_share) * fraction) / len(entries))

        try:
            # one BLAS thread: the many small eigendecompositions ran up to 10x slower with threads
            # fighting over the cores of a loaded machine (a 426 x 426 eigh: 1.1 s vs 0.1 s)
            with threadpool_limits(limits=1):
                plan = plan_benchmark(Y, p["half_width"], p["level"], candidates, fractions, p["seeds"],
                                      p.get("params") or {}, scale, p.get("max_seconds"), progress=step)
                if n_sessions:
                    plan["session"] = plan_session(Y, p["half_width"], p["level"], score_range=bounds,
                                                   n_targets=n_sessions, max_seconds=p.get("max_seconds"),
                                                   progress=session_step)
        except ValueError as exc:  # the data changed since the request
            raise InvalidInput(f"benchmark {entry['name']!r}: {exc}", [{"benchmark": entry["name"],
                                                                        "detail": str(exc)}]) from None
        plans[entry["name"]] = json_safe(plan)
        ctx.progress((i + 1) / len(entries))
    result = {"half_width": p["half_width"], "level": p["level"],
              "candidates": [f"{c.method}:{c.predictor}" for c in candidates],
              "benchmarks": plans, "suite": json_safe(plan_suite(plans))}
    sessions = [plan["session"] for plan in plans.values() if "session" in plan]
    if sessions and len(sessions) == len(plans):
        result["suite"]["session"] = json_safe(suite_session_items(sessions))
    result["savings"] = json_safe(savings_of(result, p.get("cost_per_item")))
    return result
