"""Response model of ``GET /v1/benchmark-similarity``."""

from __future__ import annotations

from pydantic import BaseModel, Field


class OrderedBenchmark(BaseModel):
    rank: int
    benchmark: str
    gain: float


class BenchmarkSimilarity(BaseModel):
    """M_bb' (eq. 12) over the benchmarks, in the order asked, and the greedy ordering (eq. 13)."""

    model: str
    benchmarks: list[str]
    matrix: list[list[float]]
    ordering: list[OrderedBenchmark]
    signature: str | None = Field(None, description="Key of the inputs; present when the result comes from a job.")
