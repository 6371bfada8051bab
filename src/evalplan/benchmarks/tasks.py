"""The ``score_stats`` job (queue ``cpu``): validation and statistics of one benchmark's score matrix."""

from __future__ import annotations

from typing import Any

from evalplan.benchmarks.scores import matrix_for
from evalplan.benchmarks.service import get_benchmark
from evalplan.benchmarks.stats import KIND
from evalplan.core.benchmarks.score_stats import score_matrix_stats
from evalplan.kit.jobs import JobContext, register


@register(KIND, queue="cpu")
def run_score_stats(ctx: JobContext) -> dict[str, Any]:
    """Load the matrix, then compute the statistics in ``evalplan.core.benchmarks.score_stats``."""
    with ctx.session_factory() as session:
        benchmark = get_benchmark(session, ctx.payload["benchmark_id"])
        version = benchmark.data_version
        matrix = matrix_for(session, benchmark, ctx.payload["metric"])
    ctx.progress(0.5)
    stats = score_matrix_stats(matrix.values, matrix.model_names, matrix.item_ids)
    return {"benchmark": benchmark.name, "metric": ctx.payload["metric"], "data_version": version, **stats}
