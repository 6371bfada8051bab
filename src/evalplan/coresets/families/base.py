"""The coreset-family protocol: what the text, score-based and hidden-state families each implement.

A family owns a set of method names and answers, for them, the three questions of a coreset's
life: is this request valid (:meth:`CoresetFamily.check_params`, :meth:`CoresetFamily.validate`,
synchronous, 422 before anything is stored), how is the coreset selected (:meth:`CoresetFamily.select`,
inside a job of ``job_kind`` on ``queue``), and what does a target's coreset scores predict
(:meth:`CoresetFamily.predict`; from the state :meth:`CoresetFamily.freeze` stored at publish for a
published version). ``evalplan.coresets.families`` maps method names to families.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.orm import Session

from evalplan.db.models import Benchmark, Coreset
from evalplan.kit.jobs import JobContext


@dataclass
class CoresetRequest:
    """``POST /v1/coresets`` as the service sees it (``embedding_model`` already defaulted)."""

    method: str
    benchmarks: list[str]
    budget: int | dict[str, float]
    name: str | None = None
    reference_models: list[str] | str | None = None
    predictor: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    embedding_model: str | None = None
    visibility: str = "private"


@dataclass
class SelectionPlan:
    """What a family's validation decided: stored on the pending coreset and handed to its job."""

    payload: dict[str, Any]  # the job's payload (besides ``coreset_id``)
    reference_models: list[str] | str | None  # as stored on the coreset
    predictor: str | None = None  # the predictor stored on the coreset
    embedding_model: str | None = None  # text families only


@dataclass
class TargetScores:
    """A target's scores on a coreset's items, as predict receives them."""

    model: str | None  # the target's name (when given)
    values: dict[int, float]  # item pk -> score
    benchmark_of: dict[int, str]  # item pk of every coreset item -> its benchmark id
    benchmarks: dict[str, Benchmark]  # the coreset's benchmarks by id


class CoresetFamily(Protocol):
    """One family of coreset methods (see the module docstring)."""

    name: str  # "text", "score_based", "hidden_state"
    methods: tuple[str, ...]
    job_kind: str  # the job kind that runs :meth:`select`
    queue: str  # "cpu" or "gpu"
    default_level: float  # the interval level of :meth:`predict` when the caller gives none

    def check_params(self, method: str, params: dict[str, Any], seed: int, *,
                     field: str = "params") -> dict[str, Any]:
        """422 unless ``params`` are valid for ``method`` (errors at ``field.<name>``); the checked params."""
        ...

    def validate(self, session: Session, request: CoresetRequest, benchmarks: list[Benchmark]) -> SelectionPlan:
        """422 for anything the method cannot run on (``request.params`` are checked already)."""
        ...

    def select(self, ctx: JobContext, coreset_id: str) -> dict[str, Any]:
        """The selection job: select, persist the ranked items (``evalplan.coresets.repository``); the job result."""
        ...

    def predict(self, session: Session, coreset: Coreset, scores: TargetScores, level: float) -> dict[str, Any]:
        """Full-benchmark estimates (``benchmarks``, ``capabilities``, ``overall``, ``extrapolation``).
        A published coreset predicts from its frozen state alone (:meth:`freeze`)."""
        ...

    def freeze(self, session: Session, coreset: Coreset) -> dict[str, Any]:
        """At publish: everything :meth:`predict` reads besides the coreset's items and the immutable
        benchmark settings (the references' scores, item counts), so a published version's predictions
        never move when the source data changes (stored in ``fitted_state["frozen"]``)."""
        ...
