"""Coreset persistence: the pending coreset with its job, its ranked items, and a selection job's
outcome (the items, diagnostics and fitted state, or the failure).

The outcome helpers are shared by the text, score-based and hidden-state selection jobs. ``diagnostics`` is returned by
``GET /v1/coresets/{id}`` and stays small; what only predict needs (the score-based references'
coreset-score matrices) goes to the deferred ``fitted_state`` column (docs/DECISIONS.md).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from evalplan.auth.audit import record
from evalplan.coresets.curation import (
    base_provenance,
    check_name,
    data_provenance,
    insert_next_version,
    published_reads,
)
from evalplan.coresets.families.base import CoresetRequest, SelectionPlan
from evalplan.db.models import Benchmark, Coreset, CoresetItem, Item, Job
from evalplan.kit.db import begin_write
from evalplan.kit.errors import Conflict
from evalplan.kit.jobs import JobContext, create_job
from evalplan.kit.validation import finite_or_none


def store_pending(session: Session, request: CoresetRequest, benchmarks: list[Benchmark], params: dict[str, Any],
                  plan: SelectionPlan, job_kind: str) -> tuple[Coreset, Job]:
    """Add the pending coreset (the next version of its name) and its queued job; dispatch after commit."""
    check_name(request.name)
    coreset = Coreset(
        name=request.name, version=1, method=request.method, status="pending", visibility=request.visibility,
        benchmark_ids=[b.id for b in benchmarks], budget=request.budget, params=params, seed=request.seed,
        reference_models=plan.reference_models, predictor=plan.predictor, embedding_model=plan.embedding_model,
    )
    coreset.provenance = base_provenance(session, coreset)
    insert_next_version(session, coreset)
    record(session, "create", "coreset", coreset.id, name=coreset.name, version=coreset.version)
    job = create_job(session, job_kind, {"coreset_id": coreset.id, **plan.payload})
    coreset.job_id = job.id
    session.flush()
    return coreset, job


def coreset_rows(session: Session, coreset: Coreset) -> list[dict[str, Any]]:
    """The ranked items: ``{benchmark (name), item, rank, gain, weight, source_index}`` in rank order."""
    with published_reads(session, coreset):  # a published version's items are shared (curation.published_reads)
        rows = session.execute(
            select(CoresetItem.rank, CoresetItem.gain, CoresetItem.weight, Item.item_id, Item.source_index,
                   Benchmark.name)
            .join(Item, Item.pk == CoresetItem.item_pk)
            .join(Benchmark, Benchmark.id == CoresetItem.benchmark_id)
            .where(CoresetItem.coreset_id == coreset.id).order_by(CoresetItem.rank)
        ).all()
    return [{"benchmark": b, "item": i, "rank": r, "gain": finite_or_none(g), "weight": finite_or_none(w),
             "source_index": s} for r, g, w, i, s, b in rows]


def benchmark_names(session: Session, ids: list[str]) -> list[str]:
    names = dict(session.execute(select(Benchmark.id, Benchmark.name).where(Benchmark.id.in_(ids))).all())
    return [names.get(i, i) for i in ids]


def load_for_job(ctx: JobContext, coreset_id: str) -> Coreset:
    """The coreset a selection job works on (detached, its columns loaded); LookupError if it vanished."""
    with ctx.session_factory() as session:
        coreset = session.get(Coreset, coreset_id)
        if coreset is None:
            raise LookupError(f"coreset {coreset_id} vanished")
        return coreset


def save_selection(ctx: JobContext, coreset_id: str, rows: list[dict[str, Any]], diagnostics: dict[str, Any],
                   params: dict[str, Any] | None = None, fitted_state: dict[str, Any] | None = None) -> None:
    """Replace the coreset's items with ``rows`` and mark it ready (``params``: resolved, e.g. tuned alpha;
    ``fitted_state``: what predict refits from, stored apart from ``diagnostics``). The data's provenance (a
    scan of the scores) is read before the write transaction, which only writes."""
    with ctx.session_factory() as session:
        provenance = data_provenance(session, session.get_one(Coreset, coreset_id))
    with ctx.session_factory() as session:
        coreset = begin_write(session).get_one(Coreset, coreset_id, with_for_update=True)
        if coreset.published_at is not None:
            raise Conflict(f"coreset {coreset_id} is published: its items never change",
                           [{"field": "published_at", "detail": "published versions are frozen"}])
        session.execute(delete(CoresetItem).where(CoresetItem.coreset_id == coreset_id))
        if rows:
            session.execute(insert(CoresetItem), rows)
        if params is not None:
            coreset.params = params
        if fitted_state is not None:
            coreset.fitted_state = fitted_state
        coreset.status, coreset.diagnostics, coreset.error = "ready", diagnostics, None
        coreset.provenance = {**(coreset.provenance or {}), "params": coreset.params, **provenance}
        session.commit()


def mark_coreset_failed(ctx: JobContext, coreset_id: str, exc: Exception) -> None:
    """Record why a coreset's job failed on the coreset itself (the job keeps its own error)."""
    with ctx.session_factory() as session:
        coreset = begin_write(session).get(Coreset, coreset_id)
        if coreset is not None:
            coreset.status = "failed"
            coreset.error = {"title": type(exc).__name__, "detail": str(exc)}
            session.commit()
