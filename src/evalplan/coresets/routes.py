"""Static coresets (``/v1/coresets``): create (202 + job), read, list, export, predict."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, Response

from evalplan.auth.caller import SCOPE_EXTRA
from evalplan.auth.deps import DbSession
from evalplan.charts.http import chart_response
from evalplan.coresets import curation
from evalplan.coresets import export as coreset_export
from evalplan.coresets import plots as coreset_plots
from evalplan.coresets import predict as coreset_predict
from evalplan.coresets import service as coreset_service
from evalplan.coresets.families.base import CoresetRequest
from evalplan.coresets.registry import family_of
from evalplan.coresets.schemas import (
    CoresetBatchPrediction,
    CoresetCreate,
    CoresetCreated,
    CoresetDiff,
    CoresetList,
    CoresetOut,
    CoresetPrediction,
    CoresetRef,
    CoresetSummary,
    DeprecateRequest,
    PredictRequest,
)
from evalplan.db.models import Coreset
from evalplan.embeddings.service import allowed_model
from evalplan.kit.deps import AppSettings, JobQueue, Pagination, accepted
from evalplan.kit.errors import InvalidInput, NotFound
from evalplan.kit.schemas import JobRef, VisibilityPatch

router = APIRouter(prefix="/v1/coresets", tags=["coresets"])
READ_ONLY = {SCOPE_EXTRA: "read"}  # predict stores nothing


@router.post("", status_code=202, response_model=CoresetCreated)
def create_coreset(body: CoresetCreate, session: DbSession, settings: AppSettings, jobs: JobQueue) -> JSONResponse:
    """Validate the request, store a pending coreset and start its selection job."""
    allowed_model(settings, body.embedding_model, "embedding_model")
    coreset, job = coreset_service.create_coreset(session, CoresetRequest(**body.model_dump()),
                                                  settings.embedding_model)
    session.commit()
    jobs.submit(job.id, job.queue)
    created = CoresetCreated(coreset=CoresetRef(id=coreset.id, status=coreset.status),
                             job=JobRef(id=job.id, status=job.status))
    return accepted(created, f"/v1/coresets/{coreset.id}")


@router.get("", response_model=CoresetList)
def list_coresets(session: DbSession, page: Pagination, name: Annotated[str | None, Query()] = None,
                  benchmark: Annotated[str | None, Query(description="Only coresets that include this benchmark.")]
                  = None) -> CoresetList:
    result = coreset_service.list_coresets(session, limit=page.limit, cursor=page.cursor, name=name,
                                           benchmark=benchmark)
    return CoresetList(items=[CoresetSummary.model_validate(coreset_service.summary_view(session, c))
                              for c in result.items], next_cursor=result.next_cursor)


@router.get("/{coreset_id}", response_model=CoresetOut)
def read_coreset(coreset_id: str, session: DbSession) -> CoresetOut:
    coreset = coreset_service.get_coreset(session, coreset_id)
    return CoresetOut.model_validate(coreset_service.coreset_view(session, coreset))


@router.get("/{coreset_id}/export", response_class=Response,
            responses={200: {"content": {"application/x-ndjson": {}, "text/csv": {}, "application/json": {}},
                             "description": "The coreset in the requested format."}})
def export_coreset(coreset_id: str, session: DbSession,
                   format: Annotated[str, Query(description="jsonl, csv, lm-eval or inspect")] = "jsonl") -> Response:
    coreset = coreset_service.get_coreset(session, coreset_id)
    body, media_type = coreset_export.export_coreset(session, coreset, format)
    return Response(body, media_type=media_type)


@router.post("/{coreset_id}/predict", response_model=CoresetPrediction | CoresetBatchPrediction,
             response_model_exclude_unset=True, openapi_extra=READ_ONLY)
def predict(coreset_id: str, body: PredictRequest, session: DbSession) -> CoresetPrediction | CoresetBatchPrediction:
    """Full-benchmark estimates with intervals from the target model's coreset scores (or, with
    ``models``, from each listed model's stored scores)."""
    coreset = coreset_service.get_coreset(session, coreset_id)
    if body.models is not None:
        if body.model is not None or body.scores is not None:
            raise InvalidInput("send `models` alone, or one `model` / `scores`",
                               [{"field": "models", "detail": "not with model or scores"}])
        batch = coreset_predict.predict_models(session, coreset, body.models, level=body.level)
        return CoresetBatchPrediction.model_validate(batch)
    scores = None if body.scores is None else [s.model_dump() for s in body.scores]
    result = coreset_predict.predict(session, coreset, model=body.model, scores=scores, level=body.level)
    return CoresetPrediction.model_validate(result)


@router.get("/{coreset_id}/plot.{fmt}", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}, "image/png": {}}, "description": "The chart."}})
def plot(coreset_id: str, fmt: Literal["svg", "png"], session: DbSession) -> Response:
    """The coreset's charts in one figure: composition by benchmark and capability, the greedy gain
    curve (text methods with gains) and the reference models' held-out predicted vs true scores with
    intervals (score-based methods). `plot.svg`: image/svg+xml; `plot.png`."""
    coreset = coreset_service.get_coreset(session, coreset_id)
    coreset_service.require_ready(coreset)
    return chart_response(coreset_plots.coreset_figure(session, coreset), fmt, f"coreset-{coreset.id}")


def _out(session: DbSession, coreset_id: str) -> CoresetOut:
    return CoresetOut.model_validate(coreset_service.coreset_view(session, coreset_service.get_coreset(session,
                                                                                                      coreset_id)))


def _curate(session: DbSession, coreset_id: str, change: Callable[[Coreset], object]) -> CoresetOut:
    """``change`` the coreset (locked for a write), commit, and answer it."""
    coreset = coreset_service.get_coreset(session, coreset_id, write=True, for_update=True)
    change(coreset)
    session.commit()
    return _out(session, coreset.id)


@router.patch("/{coreset_id}", response_model=CoresetOut)
def patch_coreset(coreset_id: str, body: VisibilityPatch, session: DbSession) -> CoresetOut:
    """Change the visibility (`private` or `public`); audited."""
    return _curate(session, coreset_id, lambda coreset: curation.set_visibility(session, coreset, body.visibility))


@router.post("/{coreset_id}/publish", response_model=CoresetOut)
def publish_coreset(coreset_id: str, session: DbSession) -> CoresetOut:
    """Freeze a ready version: its items, weights, fitted predictor and calibration never change, and it
    cannot be deleted. Sets `published_at` and `published_by`; publishing again is a no-op."""
    return _curate(session, coreset_id,
                   lambda coreset: curation.publish(session, coreset, family_of(coreset.method).freeze))


@router.post("/{coreset_id}/deprecate", response_model=CoresetOut)
def deprecate_coreset(coreset_id: str, body: DeprecateRequest, session: DbSession) -> CoresetOut:
    """Mark a published version deprecated with a message every reader sees."""
    return _curate(session, coreset_id, lambda coreset: curation.deprecate(session, coreset, body.message))


@router.delete("/{coreset_id}", status_code=204, response_class=Response)
def delete_coreset(coreset_id: str, session: DbSession) -> Response:
    """Delete an unpublished version (a published one is 409)."""
    coreset = coreset_service.get_coreset(session, coreset_id, write=True, for_update=True)
    curation.delete_coreset(session, coreset)
    session.commit()
    return Response(status_code=204)


@router.get("/{coreset_id}/diff", response_model=CoresetDiff)
def diff_coresets(coreset_id: str, session: DbSession,
                  against: Annotated[str, Query(description="The other coreset (id or name@version).")]) -> CoresetDiff:
    """Items added (in the coreset, not in `against`) and removed (in `against`, not in the coreset)."""
    coreset = coreset_service.get_coreset(session, coreset_id)
    other = curation.find_coreset(session, against)
    if other is None:
        raise NotFound(f"coreset {against!r} does not exist",
                       [{"parameter": "against", "detail": "no coreset with this id or name@version"}])
    return CoresetDiff.model_validate(curation.diff(session, coreset, other))
