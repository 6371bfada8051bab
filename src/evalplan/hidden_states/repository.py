"""Reading stored hidden states: one model's row of a benchmark, and its matrix aligned to items."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Row, func, select
from sqlalchemy.orm import Session

from evalplan.db.models import Benchmark, HiddenState, HiddenStateChunk, Item, Model
from evalplan.hidden_states.npy_format import MAX_NAMED
from evalplan.kit.errors import InvalidInput


def hidden_state_listing(session: Session, benchmark_id: str) -> list[Row[HiddenState, str, Any]]:
    """(hidden state, model name, stored bytes) of the benchmark's readable models' hidden states, by model name."""
    return list(session.execute(
        select(HiddenState, Model.name, func.coalesce(func.sum(func.length(HiddenStateChunk.data)), 0))
        .join(Model, Model.id == HiddenState.model_id)
        .outerjoin(HiddenStateChunk, HiddenStateChunk.hidden_state_id == HiddenState.id)
        .where(HiddenState.benchmark_id == benchmark_id)
        .group_by(HiddenState.id, Model.name).order_by(Model.name)
    ).all())


def hidden_state_row(session: Session, benchmark: Benchmark, model: Model) -> HiddenState | None:
    return session.scalars(select(HiddenState).where(
        HiddenState.benchmark_id == benchmark.id, HiddenState.model_id == model.id)).first()


def load_hidden_states(session: Session, benchmark: Benchmark, model: Model,
                       item_pks: np.ndarray | None = None) -> np.ndarray:
    """The model's hidden states (n x d, stored dtype) aligned to ``item_pks`` (default: every item of
    the benchmark in ``items.pk`` order). Items without a stored row are a 422 naming them."""
    state = hidden_state_row(session, benchmark, model)
    if state is None:
        raise InvalidInput(f"model {model.name!r} has no hidden states on benchmark {benchmark.name!r}",
                           [{"field": "reference_models", "model": model.name, "detail": "no hidden states"}])
    if item_pks is None:
        item_pks = np.array(list(session.scalars(
            select(Item.pk).where(Item.benchmark_id == benchmark.id).order_by(Item.pk))), dtype=np.int64)
    matrix = np.empty((state.n_items, state.dim), dtype=state.dtype)
    stmt = (select(HiddenStateChunk.row_start, HiddenStateChunk.n_rows, HiddenStateChunk.data)
            .where(HiddenStateChunk.hidden_state_id == state.id).order_by(HiddenStateChunk.seq)
            .execution_options(yield_per=8))
    filled = 0
    for row_start, n_rows, data in session.execute(stmt):
        matrix[row_start:row_start + n_rows] = np.frombuffer(data, dtype=np.dtype(state.dtype).newbyteorder("<")
                                                              ).reshape(n_rows, state.dim)
        filled += n_rows
    if filled != state.n_items:
        raise RuntimeError(f"hidden states {state.id} are incomplete ({filled} of {state.n_items} rows)")
    stored = np.frombuffer(state.item_pks, dtype="<i8")
    order = np.argsort(stored, kind="stable")
    wanted = np.asarray(item_pks, dtype=np.int64)
    pos = np.searchsorted(stored, wanted, sorter=order)
    pos = np.minimum(pos, len(stored) - 1)
    rows = order[pos]
    missing = stored[rows] != wanted
    if missing.any():
        missing_pks = wanted[missing].tolist()
        names = dict(session.execute(select(Item.pk, Item.item_id).where(Item.pk.in_(missing_pks[:MAX_NAMED]))).all())
        shown = ", ".join(repr(names.get(pk, pk)) for pk in missing_pks[:MAX_NAMED])
        raise InvalidInput(
            f"model {model.name!r} has no hidden states for {len(missing_pks)} item(s) of benchmark "
            f"{benchmark.name!r}: {shown}" + (" ..." if len(missing_pks) > MAX_NAMED else ""),
            [{"field": "reference_models", "model": model.name, "item": names.get(pk, pk), "detail": "no hidden state"}
             for pk in missing_pks[:MAX_NAMED]])
    return matrix[rows]
