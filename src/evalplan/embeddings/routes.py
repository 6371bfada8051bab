"""Item-text embeddings (``POST /v1/embeddings``): start the job that computes the missing ones."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from evalplan.auth.deps import DbSession
from evalplan.embeddings import service as embedding_service
from evalplan.embeddings.schemas import EmbeddingRequest
from evalplan.kit.deps import AppSettings, JobQueue, accepted
from evalplan.kit.schemas import JobAccepted, JobRef

router = APIRouter(prefix="/v1/embeddings", tags=["embeddings"])


@router.post("", status_code=202, response_model=JobAccepted)
async def embed(body: EmbeddingRequest, session: DbSession, settings: AppSettings, jobs: JobQueue) -> JSONResponse:
    """Embed the item texts of the benchmarks (cached by text hash and model; only new texts are computed).

    Returns `202 {"job": {id, status}}`; the job's result counts cached, embedded, score-only and
    truncated items. Unknown benchmark: 404; a benchmark without any item text: 422.
    """
    model = embedding_service.allowed_model(settings, body.model, "model")

    def enqueue() -> tuple[str, str, str]:
        job = embedding_service.start_embedding_job(session, body.benchmarks, model)
        session.commit()
        return job.id, job.status, job.queue

    job_id, status, queue = await run_in_threadpool(enqueue)
    jobs.submit(job_id, queue)
    return accepted(JobAccepted(job=JobRef(id=job_id, status=status)), f"/v1/jobs/{job_id}")
