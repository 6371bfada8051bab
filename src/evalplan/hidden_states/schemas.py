"""Response models of ``/v1/benchmarks/{benchmark}/hidden-states`` (docs/HIDDEN_STATES.md)."""

from __future__ import annotations

from pydantic import BaseModel

from evalplan.kit.schemas import UtcDatetime


class HiddenStatesStored(BaseModel):
    benchmark: str
    model: str
    id: str
    n_items: int
    dim: int
    dtype: str


class HiddenStatesOut(BaseModel):
    id: str
    benchmark: str
    model: str
    n_items: int
    dim: int
    dtype: str
    bytes: int
    created_at: UtcDatetime | None


class HiddenStatesList(BaseModel):
    items: list[HiddenStatesOut]
    next_cursor: None = None
