"""Static coresets: create (202 + job), read, list, export, predict."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.orm import Session

from app.kit.deps import PageDep, PageParams, SessionDep, submit_job
from app.coresets.schemas import CoresetCreate, PredictRequest
from app.coresets import service as coreset_service
from app.coresets import predict as coreset_predictions

router = APIRouter(prefix="/v1/coresets", tags=["coresets"])


@router.post("", status_code=202)
def create_coreset(body: CoresetCreate, request: Request, session: Session = SessionDep) -> JSONResponse:
    """Validate the request, store a pending coreset and start its selection job."""
    settings = request.app.state.settings
    coreset, job = coreset_service.create_coreset(
        session, coreset_service.CoresetRequest(**body.model_dump()), settings.embedding_model)
    session.commit()
    submit_job(request, job.id, job.queue)
    return JSONResponse({"coreset": {"id": coreset.id, "status": coreset.status},
                         "job": {"id": job.id, "status": job.status}},
                        status_code=202, headers={"Location": f"/v1/coresets/{coreset.id}"})


@router.get("")
def list_coresets(name: str | None = Query(None), page: PageParams = PageDep, session: Session = SessionDep) -> JSONResponse:
    result = coreset_service.list_coresets(session, limit=page.limit, cursor=page.cursor, name=name)
    items = [{"id": c.id, "name": c.name, "version": c.version, "method": c.method, "status": c.status,
              "benchmarks": coreset_service.benchmark_names(session, c.benchmark_ids), "budget": c.budget,
              "created_at": c.created_at.isoformat() if c.created_at else None} for c in result.items]
    return JSONResponse({"items": items, "next_cursor": result.next_cursor})


@router.get("/{coreset_id}")
def read_coreset(coreset_id: str, session: Session = SessionDep) -> JSONResponse:
    return JSONResponse(coreset_service.coreset_view(session, coreset_service.get_coreset(session, coreset_id)))


@router.get("/{coreset_id}/export")
def export_coreset(coreset_id: str, format: str = Query("jsonl", description="jsonl, csv, lm-eval or inspect"),
                   session: Session = SessionDep) -> Response:
    coreset = coreset_service.get_coreset(session, coreset_id)
    body, media_type = coreset_service.export_coreset(session, coreset, format)
    return Response(body, media_type=media_type)


@router.post("/{coreset_id}/predict")
def predict(coreset_id: str, body: PredictRequest, session: Session = SessionDep) -> JSONResponse:
    """Full-benchmark estimates with intervals from the target model's coreset scores."""
    coreset = coreset_service.get_coreset(session, coreset_id)
    scores = None if body.scores is None else [s.model_dump() for s in body.scores]
    return JSONResponse(coreset_predictions.predict(session, coreset, model=body.model, scores=scores, level=body.level))
