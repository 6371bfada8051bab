"""The ``plan`` job (queue ``cpu``): per benchmark, the references' score matrix and
:func:`app.core.planner.plan_benchmark`; then the suite total (:func:`app.core.planner.plan_suite`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.benchmarks.score_matrix import load_matrix
from app.benchmarks.service import get_benchmark
from app.core.planner import DEFAULT_FRACTIONS, Candidate, plan_benchmark, plan_suite
from app.db.models import Benchmark
from app.kit.errors import InvalidInput
from app.kit.jobs import JobContext, register
from app.kit.validation import json_safe
from app.plans.service import KIND


def score_range(benchmark: Benchmark) -> tuple[float | None, float | None]:
    """The benchmark's score range (binary: [0, 1]); None for an open end."""
    if benchmark.score_kind == "binary":
        return 0.0, 1.0
    return benchmark.score_min, benchmark.score_max


@register(KIND, queue="cpu")
def run_plan_job(ctx: JobContext) -> dict[str, Any]:
    p = ctx.payload
    candidates = [Candidate(m, pred) for m, pred in p["candidates"]]
    fractions = p.get("budgets") or DEFAULT_FRACTIONS
    plans: dict[str, dict[str, Any]] = {}
    entries = p["benchmarks"]
    for i, entry in enumerate(entries):
        with ctx.session_factory() as session:
            benchmark = get_benchmark(session, entry["id"])
            matrix = load_matrix(session, benchmark, entry["metric"])
            scale = score_range(benchmark)
        rows = [r for r, n in enumerate(matrix.model_names) if n in set(entry["references"])]
        Y = np.asarray(matrix.values)[rows]
        try:
            plan = plan_benchmark(Y, p["half_width"], p["level"], candidates, fractions, p["seeds"],
                                  p.get("params") or {}, scale, p.get("max_seconds"))
        except ValueError as exc:  # the data changed since the request
            raise InvalidInput(f"benchmark {entry['name']!r}: {exc}", [{"benchmark": entry["name"],
                                                                        "detail": str(exc)}]) from None
        plans[entry["name"]] = json_safe(plan)
        ctx.progress((i + 1) / len(entries))
    return {"half_width": p["half_width"], "level": p["level"],
            "candidates": [f"{c.method}:{c.predictor}" for c in candidates],
            "benchmarks": plans, "suite": json_safe(plan_suite(plans))}
