"""What other teams build on a benchmark or a model: the integrity checks before a deletion or a change
to private (``DELETE /v1/benchmarks/{b}``, ``DELETE /v1/models/{m}``, ``PATCH`` visibility, team deletion).

They read the coreset and session tables across teams (``unscoped``: counted, never returned to the
caller), so the lower domains (models, benchmarks) and team deletion ask here instead of importing the
higher domains (coresets, sessions) that own those rows.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from evalplan.auth.scoping import unscoped
from evalplan.db.models import Benchmark, BenchmarkModel, Coreset, EvalSession, Model

__all__ = ["foreign_dependents", "published_dependents"]


def published_dependents(session: Session, *, benchmark_id: str | None = None,
                         model: Model | None = None) -> list[str]:
    """Published coresets (of any team: counted, never shown) built on the benchmark, or using the model as
    a reference (by name, or through ``"all"`` when it has scores on one of their benchmarks)."""
    with unscoped(session):
        rows = list(session.execute(select(Coreset.id, Coreset.benchmark_ids, Coreset.reference_models)
                                    .where(Coreset.published_at.isnot(None))).all())
        scored_on: set[str] = set()
        if model is not None:
            scored_on = set(session.scalars(select(BenchmarkModel.benchmark_id)
                                            .where(BenchmarkModel.model_id == model.id)))
    found = []
    for coreset_id, benchmark_ids, references in rows:
        ids = set(benchmark_ids or [])
        if benchmark_id is not None and benchmark_id in ids:
            found.append(coreset_id)
        elif model is not None and ids & scored_on and (
                references == "all" or (isinstance(references, list) and model.name in references)):
            found.append(coreset_id)
    return found


def foreign_dependents(session: Session, benchmark: Benchmark) -> list[str]:
    """Ids of other teams' coresets and sessions built on ``benchmark`` (unscoped count: they are not the
    caller's to read, so only how many is reported)."""
    with unscoped(session):
        coresets = [c.id for c in session.scalars(select(Coreset).where(Coreset.team_id != benchmark.team_id))
                    if benchmark.id in (c.benchmark_ids or [])]
        sessions = list(session.scalars(select(EvalSession.id).where(EvalSession.benchmark_id == benchmark.id,
                                                                     EvalSession.team_id != benchmark.team_id)))
    return coresets + sessions
