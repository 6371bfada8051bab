"""Response models of ``GET /v1/leaderboard`` (API.md "Leaderboard"): the JSON page, as
``evalplan.leaderboard.service`` builds it (the route serializes with ``response_model_exclude_unset``, so a
cell carries ``status`` or ``extrapolation`` only where its kind has one)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class LeaderboardBenchmark(BaseModel):
    """A column of the table."""

    id: str
    name: str
    n_items: int
    score_kind: str


class LeaderboardCell(BaseModel):
    """A model's score on one benchmark: measured, a session's estimate or a coreset's prediction."""

    kind: Literal["measured", "session", "coreset"]
    score: float
    ci: list[float | None] | None = Field(description="The interval at `level` (null for a measured score).")
    level: float | None
    n_observed: int | None = Field(description="Items behind the score (all of them, the session's, the coreset's).")
    source: str | None = Field(description="The session or coreset id (null for a measured score).")
    status: str | None = Field(None, description="Session cells only: the session's status.")
    extrapolation: bool | None = Field(None, description="Coreset cells only: the target lies outside the "
                                                         "references' range.")


class LeaderboardRow(BaseModel):
    """A model's row: its cells by benchmark name (null where it has none) and their mean over every benchmark."""

    model: str
    mean: float | None
    kinds: list[Literal["measured", "session", "coreset"]]
    cells: dict[str, LeaderboardCell | None]


class LeaderboardPage(BaseModel):
    """One page of the sorted rows (``limit`` / ``cursor``)."""

    benchmarks: list[LeaderboardBenchmark]
    level: float
    sort: str
    order: Literal["desc", "asc"]
    n_models: int
    items: list[LeaderboardRow]
    next_cursor: str | None
