"""Resolve ``{benchmark}`` and ``{model}`` references, which accept an id or a unique name."""

from __future__ import annotations

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from app.db.models import Benchmark, Model
from app.errors import NotFound


def get_benchmark(session: Session, ref: str, *, for_update: bool = False) -> Benchmark:
    stmt = select(Benchmark).where(or_(Benchmark.id == ref, Benchmark.name == ref))
    if for_update:
        stmt = stmt.with_for_update()
    benchmark = session.scalars(stmt).first()
    if benchmark is None:
        raise NotFound(f"benchmark {ref!r} does not exist",
                       [{"parameter": "benchmark", "detail": f"no benchmark with id or name {ref!r}"}])
    return benchmark


def get_model(session: Session, ref: str) -> Model:
    model = session.scalars(select(Model).where(or_(Model.id == ref, Model.name == ref))).first()
    if model is None:
        raise NotFound(f"model {ref!r} does not exist",
                       [{"parameter": "model", "detail": f"no model with id or name {ref!r}"}])
    return model
