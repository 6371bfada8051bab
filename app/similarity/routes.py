"""Benchmark similarity from prompt text (papers/000 §4.4)."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from app.kit.deps import SessionDep, job_accepted
from app.similarity import service as similarity_service

router = APIRouter(prefix="/v1", tags=["coresets"])


@router.get("/benchmark-similarity", responses={202: {"description": "Large or not yet embedded: poll the job."}})
def benchmark_similarity(
    request: Request,
    benchmarks: list[str] = Query(..., description="Benchmark names or ids, repeated or comma-separated."),
    model: str | None = Query(None, description="Embedding model; default EVALPLAN_EMBEDDING_MODEL."),
    session: Session = SessionDep,
) -> JSONResponse:
    """M_bb' = I_f(A_b; A_b') / min(f(A_b), f(A_b')) and the greedy benchmark-level FL ordering (eq. 13)."""
    refs = [r.strip() for value in benchmarks for r in value.split(",") if r.strip()]
    model_name = model or request.app.state.settings.embedding_model
    result, job, created = similarity_service.similarity_or_job(session, refs, model_name)
    if result is not None:
        return JSONResponse(result)
    assert job is not None
    return job_accepted(request, session, job, created)
