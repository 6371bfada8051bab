"""Request/response models of the Static coresets section of API.md (``/v1/coresets``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from evalplan.coresets.registry import METHODS, methods_description
from evalplan.kit.schemas import JobRef, RequestModel, Seed, UtcDatetime, Visibility


class CoresetCreate(RequestModel):

    name: str | None = Field(None, pattern=r"^[^\x00-\x1f]{1,200}$",
                             description="Series name (no '@' or '/'); each create adds version 1 + latest "
                                         "of the team's series.")
    # validated by the service against the registry (a located 422 naming the valid methods)
    method: str = Field(description=methods_description(), json_schema_extra={"enum": list(METHODS)})
    benchmarks: list[str] = Field(min_length=1, description="Benchmark names or ids.")
    budget: int | dict[str, float] = Field(description='Total item count, or {"fraction": f} of each benchmark.')
    reference_models: list[str] | Literal["all"] | None = Field(
        None, description="Reference (calibration) models; for facility_location they tune alpha (papers/000 §4.1).")
    predictor: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    seed: Seed = 0
    embedding_model: str | None = Field(None, description="Default: EVALPLAN_EMBEDDING_MODEL.")
    visibility: Visibility = "private"


class ScoreIn(RequestModel):

    benchmark: str
    item: str
    score: float


class PredictRequest(RequestModel):

    model: str | None = Field(None, description="The target model; without `scores`, its stored scores are used.")
    models: list[str] | None = Field(
        None, min_length=1, max_length=1000,
        description="Batch: several models with stored scores (names or ids); the answer is `{predictions: [...]}`.")
    scores: list[ScoreIn] | None = None
    level: float | None = Field(
        None, gt=0, lt=1, description="Interval level; default 0.95 for every family.")


class CoresetRef(BaseModel):
    id: str
    status: str


class CoresetCreated(BaseModel):
    """``202``: the pending coreset and the job that selects its items."""

    coreset: CoresetRef
    job: JobRef


class CoresetItemOut(BaseModel):
    benchmark: str
    item: str
    rank: int
    gain: float | None
    weight: float | None


class CoresetJob(BaseModel):
    id: str
    status: str
    progress: float


class CoresetOut(BaseModel):
    id: str
    name: str | None
    version: int
    method: str
    status: str
    params: dict[str, Any] | None
    benchmarks: list[str]
    budget: int | dict[str, float]
    seed: int
    reference_models: list[str] | str | None
    predictor: str | None
    embedding_model: str | None
    n_items: int
    items: list[CoresetItemOut]
    diagnostics: dict[str, Any] | None
    error: dict[str, Any] | None
    job: CoresetJob | None
    created_at: UtcDatetime | None
    team: str | None = None
    visibility: Visibility = "private"
    published_at: UtcDatetime | None = None
    published_by: str | None = None
    deprecated: bool = False
    deprecated_at: UtcDatetime | None = None
    deprecation_message: str | None = None
    provenance: dict[str, Any] | None = None
    stale: bool = False
    stale_changes: list[dict[str, Any]] = Field(default_factory=list,
                                                description="What changed in the source data since the selection.")


class CoresetSummary(BaseModel):
    id: str
    name: str | None
    version: int
    method: str
    status: str
    benchmarks: list[str]
    budget: int | dict[str, float]
    created_at: UtcDatetime | None
    team: str | None = None
    visibility: Visibility = "private"
    published_at: UtcDatetime | None = None
    deprecated: bool = False


class CoresetList(BaseModel):
    items: list[CoresetSummary]
    next_cursor: str | None


class BenchmarkEstimate(BaseModel):
    """One benchmark's estimate; score-based coresets add ``predictor``, ``extrapolation``, ``calibration``,
    ``interval_rule``."""

    estimate: float | None
    interval: list[float | None] | None
    std_error: float | None
    n_items: int
    n_total: int
    method: str | None
    predictor: str | None = None
    extrapolation: bool | None = None
    calibration: str | None = None
    interval_rule: str | None = Field(
        None, description='Score-based: how `interval` was calibrated: "extended" (the default since issue 35: '
                          '"calibrated" extended toward the de-shrunk estimate), "calibrated" (issue 16), '
                          '"conformal" (the rule before it) or "design" (`params.interval` chooses; '
                          'docs/API_NOTES.md).')
    interval_why: str | None = Field(
        None, description="Score-based: which interval answered and why, in words (the rule that sized it, the "
                          "top-decile widening, the extension, the extrapolation guard).")
    top_decile: bool | None = Field(
        None, description="Score-based, reference-calibrated intervals: the estimate is in the references' top "
                          "decile of held-out predictions, and the interval is at least as wide as the same rule on "
                          "the errors of the top references (issue 25 §3); null where it does not apply (design, "
                          "AIPW).")


class AggregateEstimate(BaseModel):
    """A capability's or the overall estimate: the mean over the covered benchmarks."""

    estimate: float | None
    interval: list[float | None] | None
    std_error: float | None
    n_benchmarks: int
    n_benchmarks_total: int
    interval_rule: str | None = Field(
        None, description='Score-based: the rule of `interval`, as for a benchmark ("extended" / "calibrated" when '
                          'every benchmark in the aggregate has the fixed-coreset errors, else "conformal").')
    interval_why: str | None = Field(None, description="Score-based: which interval answered and why, in words.")


class CoresetPrediction(BaseModel):
    coreset: str
    model: str | None
    level: float
    benchmarks: dict[str, BenchmarkEstimate]
    capabilities: dict[str, AggregateEstimate]
    overall: AggregateEstimate
    extrapolation: bool
    agreement: float | None = Field(None, description="Item-level agreement (score-based and repcore: null).")


class CoresetBatchPrediction(BaseModel):
    """``POST /v1/coresets/{id}/predict`` with ``models``: one prediction per model, in request order."""

    coreset: str
    level: float
    predictions: list[CoresetPrediction]


class DeprecateRequest(RequestModel):
    message: str = Field(min_length=1, max_length=2000, description="What readers of this version should know.")


class DiffItem(BaseModel):
    benchmark: str
    item: str


class CoresetDiff(BaseModel):
    coreset: str
    against: str
    added: list[DiffItem] = Field(description="Items of the coreset that `against` lacks.")
    removed: list[DiffItem] = Field(description="Items of `against` that the coreset lacks.")
    n_common: int
    benchmarks: dict[str, dict[str, list[str]]] = Field(description="Per benchmark: {added, removed} item ids.")
