"""Static coresets (``/v1/coresets``): create (validate, store pending, queue the selection job), read, list.

The method's family (``evalplan.coresets.registry``) validates the request and runs the job; the science
is ``evalplan.core.selection`` (text), ``evalplan.core.selection.score_based`` / ``evalplan.core.irt.irt`` (score-based)
and ``evalplan.core.repcore`` (hidden-state).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy import String, cast, select
from sqlalchemy.orm import Session

from evalplan.auth.names import check_new_names
from evalplan.auth.teams import team_name
from evalplan.benchmarks.service import get_benchmark, get_benchmarks
from evalplan.coresets import curation
from evalplan.coresets.curation_repository import write_first_on_sqlite
from evalplan.coresets.families.base import CoresetRequest
from evalplan.coresets.registry import family_of
from evalplan.coresets.repository import benchmark_names, coreset_rows, store_pending
from evalplan.coresets.shared_view import shared_view
from evalplan.db.models import Coreset, Job
from evalplan.kit.errors import Conflict
from evalplan.kit.pagination import Page, keyset_page
from evalplan.kit.repository import job_by_id


def create_coreset(session: Session, request: CoresetRequest, default_embedding_model: str) -> tuple[Coreset, Job]:
    """Validate everything, store a pending coreset and its job (dispatch after commit)."""
    if request.name:
        check_new_names(session, [request.name], "coreset", "name", slash=False)
        write_first_on_sqlite(session)  # one series' creates serialize (evalplan.coresets.curation)
    family = family_of(request.method)
    params = family.check_params(request.method, dict(request.params or {}), request.seed)
    benchmarks = get_benchmarks(session, request.benchmarks)
    request = replace(request, params=params, embedding_model=request.embedding_model or default_embedding_model)
    plan = family.validate(session, request, benchmarks)
    return store_pending(session, request, benchmarks, params, plan, family.job_kind)


def get_coreset(session: Session, coreset_id: str, *, write: bool = False, for_update: bool = False) -> Coreset:
    """The coreset ``coreset_id`` names: an id, ``name@version``, ``name@latest`` (``evalplan.coresets.curation``)."""
    return curation.get_coreset(session, coreset_id, write=write, for_update=for_update)


def curation_view(session: Session, coreset: Coreset) -> dict[str, Any]:
    """Ownership, publication and provenance fields of a coreset's responses."""
    stale, changes = curation.staleness(session, coreset) if coreset.published_at is not None else (False, [])
    return {"team": team_name(session, coreset.team_id), "visibility": coreset.visibility,
            "published_at": coreset.published_at, "published_by": coreset.published_by,
            "deprecated": coreset.deprecated_at is not None, "deprecated_at": coreset.deprecated_at,
            "deprecation_message": coreset.deprecation_message, "provenance": coreset.provenance,
            "stale": stale, "stale_changes": changes}


def require_ready(coreset: Coreset) -> None:
    if coreset.status != "ready":
        raise Conflict(f"coreset {coreset.id} is {coreset.status}, not ready",
                       [{"field": "status", "detail": coreset.status}])


def coreset_view(session: Session, coreset: Coreset) -> dict[str, Any]:
    """The coreset of ``GET /v1/coresets/{id}`` (``evalplan.coresets.schemas.CoresetOut``)."""
    job = job_by_id(session, coreset.job_id) if coreset.job_id else None
    items = [{k: v for k, v in row.items() if k != "source_index"} for row in coreset_rows(session, coreset)]
    with curation.published_reads(session, coreset):
        names = benchmark_names(session, coreset.benchmark_ids)
    return shared_view(session, coreset, {
        "id": coreset.id, "name": coreset.name, "version": coreset.version, "method": coreset.method,
        "status": coreset.status, "params": coreset.params, "benchmarks": names,
        "budget": coreset.budget, "seed": coreset.seed, "reference_models": coreset.reference_models,
        "predictor": coreset.predictor, "embedding_model": coreset.embedding_model, "n_items": len(items),
        "items": items, "diagnostics": coreset.diagnostics, "error": coreset.error,
        "job": {"id": job.id, "status": job.status, "progress": job.progress} if job else None,
        "created_at": coreset.created_at, **curation_view(session, coreset),
    })  # another team sees counts of the references, not the names it may not read (shared_view)


def summary_view(session: Session, coreset: Coreset) -> dict[str, Any]:
    """A coreset in ``GET /v1/coresets`` (``evalplan.coresets.schemas.CoresetSummary``)."""
    with curation.published_reads(session, coreset):
        names = benchmark_names(session, coreset.benchmark_ids)
    return {"id": coreset.id, "name": coreset.name, "version": coreset.version, "method": coreset.method,
            "status": coreset.status, "benchmarks": names,
            "budget": coreset.budget, "created_at": coreset.created_at,
            "team": team_name(session, coreset.team_id), "visibility": coreset.visibility,
            "published_at": coreset.published_at, "deprecated": coreset.deprecated_at is not None}


def list_coresets(session: Session, *, limit: int, cursor: str | None, name: str | None = None,
                  benchmark: str | None = None) -> Page[Coreset]:
    """Newest first; ``benchmark`` (an id or name) keeps the coresets that include it."""
    stmt = select(Coreset)
    if name is not None:
        stmt = stmt.where(Coreset.name == name)
    if benchmark is not None:
        # benchmark_ids is a JSON list of ids; ids never contain quotes, so the quoted id matches one entry
        benchmark_id = get_benchmark(session, benchmark).id
        stmt = stmt.where(cast(Coreset.benchmark_ids, String).like(f'%"{benchmark_id}"%'))
    return keyset_page(session, stmt, Coreset.id, limit=limit, cursor=cursor, what="coreset", descending=True)
