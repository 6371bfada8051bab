"""Request models of ``/v1/benchmark-selections`` (benchmark-level selection, paper 000 §4.4).

Cell values are typed ``Any`` on purpose: the service checks them itself so that a non-numeric or
non-finite cell is a located 422 (``matrix.values.<row>.<col>``) instead of being coerced.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from evalplan.kit.schemas import MAX_COUNT, RequestModel, Seed, UtcDatetime, Visibility


class MatrixIn(RequestModel):

    models: list[str] = Field(description="Row names (distinct).")
    benchmarks: list[str] = Field(description="Column names (distinct).")
    values: list[list[Any]] = Field(description="models x benchmarks; null = missing.")


class BenchmarkSelectionCreate(RequestModel):

    matrix: MatrixIn | None = Field(None, description="An uploaded models x benchmarks summary matrix.")
    benchmarks: list[str] | None = Field(
        None, description="Benchmark names or ids; the matrix is each model's mean item score per benchmark.")
    metric: str | None = Field(None, description="With `benchmarks`: the score metric (default: each benchmark's).")
    models: list[str] | None = Field(None, description="With `benchmarks`: restrict to these models (names or ids).")
    k: int = Field(ge=1, le=MAX_COUNT, description="Number of benchmarks to select, 1 <= k < B.")
    method: str = Field("facility_location", description="facility_location, entropy or mutual_information.")
    seed: Seed = 0
    ridge: float = Field(1e-3, gt=0, description="Relative ridge for the log-det methods (see evalplan.core).")
    test_fraction: float = Field(0.0, ge=0, lt=1, description="Share of models held out to report test R^2 (eq. 9).")
    visibility: Visibility = Field("private", description="private (the owning team only) or public (readable "
                                                          "by every team); PATCH changes it.")


class BenchmarkSelectionPredict(RequestModel):

    scores: dict[str, Any] = Field(description="Score of the target model on every selected benchmark.")


class SelectedBenchmark(BaseModel):
    benchmark: str
    rank: int
    gain: float | None


class Imputation(BaseModel):
    """The stored Gaussian imputation model (eq. 8) in standardized space."""

    space: str
    mean: list[float]
    scale: list[float]
    cov: list[list[float]]
    ridge: float


class BenchmarkSelectionOut(BaseModel):
    id: str
    method: str
    k: int
    seed: int
    source: str
    metric: str | None
    benchmarks: list[str]
    selected: list[SelectedBenchmark]
    residual_variance: float | None
    test_r2: float | None
    test_fraction: float
    n_models: int
    imputation: Imputation
    diagnostics: dict[str, Any]
    created_at: UtcDatetime | None
    team: str | None = None
    visibility: str | None = None


class ImputedBenchmark(BaseModel):
    estimate: float
    observed: bool


class BenchmarkSelectionPrediction(BaseModel):
    id: str
    selected: list[str]
    benchmarks: dict[str, ImputedBenchmark]
