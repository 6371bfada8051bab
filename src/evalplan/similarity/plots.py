"""The benchmark-similarity heatmap, in the greedy benchmark-level ordering (papers/000 eq. 13)."""

from __future__ import annotations

from typing import Any

from evalplan import charts
from evalplan.db.models import Job
from evalplan.similarity.service import KIND


def is_similarity(job: Job) -> bool:
    return job.kind == KIND


def ordered(result: dict[str, Any]) -> tuple[list[str], list[list[float | None]]]:
    """Names and matrix permuted into the ordering (the first pick covers the most)."""
    names = list(result["benchmarks"])
    order = [names.index(o["benchmark"]) for o in result.get("ordering") or []] or list(range(len(names)))
    matrix = result["matrix"]
    return [names[i] for i in order], [[matrix[i][j] for j in order] for i in order]


def similarity_chart(result: dict[str, Any]) -> Any:
    names, matrix = ordered(result)
    return charts.similarity_heatmap(names, matrix, value_title="similarity M (eq. 12)",
                                     title="Benchmark similarity, in the greedy coverage order")
