"""Request and response models of ``/v1/comparisons`` (API.md "Comparisons"). The route serializes with
``response_model_exclude_unset``: a session carries ``compare`` only when it is a paired session, and a
trajectory point only the fields its method records (``evalplan.sessions.schemas.TrajectoryPoint``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalplan.sessions.schemas import TrajectoryPoint

Verdict = Literal["b_better", "a_better", "undecided"]


class ComparisonRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sessions: list[str] = Field(description="Two or more session ids on one benchmark; the first is the baseline A.")
    level: float | None = Field(default=None, gt=0, lt=1, description="Interval level (default 0.95).")


class ComparedSession(BaseModel):
    """A session as the comparison shows it: its estimate, interval and trajectory."""

    id: str
    target: str | None
    method: str
    status: str
    stop_reason: str | None
    n_observed: int
    estimate: float | None
    variance: float | None
    ci: list[float | None] | None
    level: float | None
    previous: list[str] | None
    trajectory: list[TrajectoryPoint]
    compare: dict[str, Any] | None = Field(None, description="A paired session's comparator, difference and "
                                                             "decision (only for such a session).")


class PairedComparison(BaseModel):
    """B - A on the items both observed: the finite-population t interval."""

    mean_difference: float
    std_error: float | None
    interval: list[float | None]
    b_better: int
    a_better: int
    ties: int
    verdict: Verdict


class AnytimeStep(BaseModel):
    n: int
    interval: list[float | None]


class AnytimeComparison(BaseModel):
    """The anytime-valid confidence sequence on the same pairs, after each pair in arrival order."""

    interval: list[float | None]
    verdict: Verdict
    sequence: list[AnytimeStep]


class EstimatesComparison(BaseModel):
    """The difference of the two sessions' own estimates, with the normal interval."""

    difference: float
    interval: list[float | None]
    verdict: Verdict


class ComparisonPair(BaseModel):
    """A later session B against the baseline A."""

    a: str
    b: str
    a_target: str | None
    b_target: str | None
    level: float
    n_common: int
    n_items: int
    paired: PairedComparison | None = Field(description="Null when the two share no observed item.")
    anytime: AnytimeComparison | None = Field(description="Null without common items or a bounded score range.")
    estimates: EstimatesComparison | None = Field(description="Null unless both sessions have an estimate and "
                                                              "a variance.")


class ComparisonOut(BaseModel):
    """``POST /v1/comparisons`` and ``GET /v1/comparisons``: the sessions and each pair against the first."""

    benchmark: str
    level: float
    n_items: int
    sessions: list[ComparedSession]
    pairs: list[ComparisonPair]
