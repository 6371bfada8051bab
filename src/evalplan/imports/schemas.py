"""Response models of ``POST /v1/imports/lm-eval``."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ImportedTask(BaseModel):
    """One imported task (file): its benchmark and what was stored."""

    task: str
    benchmark: str
    benchmark_id: str
    benchmark_created: bool
    metric: str
    filter: str | None
    n_items: int
    items_created: int
    items_updated: int
    n_scores: int
    scores_replaced: int = Field(description="Cells that held a score of this model and metric already (overwritten).")
    default_metric: str = Field(description="The benchmark's default metric (what GET .../scores reads).")
    mean_score: float | None
    n_responses: int = Field(0, description="Model responses stored (GET /v1/benchmarks/{b}/items/{item}/responses).")
    notes: list[str] = Field(default_factory=list)


class ImportSummary(BaseModel):
    model: str
    model_id: str
    benchmarks: list[ImportedTask]
    n_scores: int
    n_responses: int = Field(0, description="Model responses stored (all tasks).")
    items_created: int = Field(description="Items this import added (all tasks).")
    scores_replaced: int = Field(description="Cells that held a score already and were overwritten (all tasks).")


class SkippedRecords(BaseModel):
    """Records an import left out for one reason: ``count`` of them, the first ``ids``."""

    what: str
    why: str
    count: int
    ids: list[str]


class HarnessImportSummary(BaseModel):
    """The result of ``POST /v1/imports/{inspect,helm,lighteval}`` (or of its job)."""

    harness: str
    n_scores: int
    n_items: int
    n_models: int
    benchmark: str
    benchmark_id: str
    benchmark_created: bool
    model: str | None = Field(description="The model, when the import holds one (else see `models`).")
    models: list[str]
    metric: str = Field(description="The stored metric: the inspect scorer, HELM stat or lighteval metric.")
    items_created: int
    items_updated: int
    scores_replaced: int = Field(description="Cells that held a score of these models and metric already "
                                             "(a second import of a model overwrites them).")
    default_metric: str = Field(description="The benchmark's default metric (what GET .../scores reads); a "
                                            "benchmark without scores takes the imported metric.")
    mean_score: float | None
    averaged_over: int = Field(description="Most values averaged into one score (epochs, trials); 1 = none.")
    n_responses: int = Field(0, description="Model responses stored, one per (item, model) the log has one for "
                                            "(GET /v1/benchmarks/{b}/items/{item}/responses).")
    skipped: list[SkippedRecords]
    notes: list[str]
