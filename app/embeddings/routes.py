"""Item-text embeddings: start the job that computes the missing ones."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from app.kit.deps import SessionDep, submit_job
from app.embeddings.schemas import EmbeddingJobAccepted, EmbeddingRequest
from app.embeddings import service as embedding_service

router = APIRouter(prefix="/v1/embeddings", tags=["embeddings"])


@router.post("", status_code=202, response_model=EmbeddingJobAccepted)
async def embed(body: EmbeddingRequest, request: Request, session: Session = SessionDep) -> JSONResponse:
    """Embed the item texts of the benchmarks (cached by text hash and model; only new texts are computed).

    Returns `202 {"job": {id, status}}`; the job's result counts cached, embedded, score-only and
    truncated items. Unknown benchmark: 404; a benchmark without any item text: 422.
    """
    model = body.model or request.app.state.settings.embedding_model

    def enqueue() -> tuple[str, str, str]:
        job = embedding_service.start_embedding_job(session, body.benchmarks, model)
        session.commit()
        return job.id, job.status, job.queue

    job_id, status, queue = await run_in_threadpool(enqueue)
    submit_job(request, job_id, queue)
    return JSONResponse({"job": {"id": job_id, "status": status}}, status_code=202,
                        headers={"Location": f"/v1/jobs/{job_id}"})
