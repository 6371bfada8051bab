"""Imports from evaluation harnesses (``POST /v1/imports/lm-eval``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from app.imports import service as import_service
from app.imports.schemas import ImportSummary
from app.integrations.lm_eval import task_from_filename
from app.kit.deps import AppSettings, DbSession, JobQueue, accepted
from app.kit.errors import InvalidInput
from app.kit.schemas import MODEL_NAME_PATTERN, JobAccepted, JobRef

router = APIRouter(prefix="/v1/imports", tags=["imports"])


@router.post("/lm-eval", status_code=201, response_model=ImportSummary,
             responses={202: {"model": JobAccepted, "description": "Large upload: imported by a job."}})
async def import_lm_eval(
    session: DbSession,
    settings: AppSettings,
    jobs: JobQueue,
    model: Annotated[str, Form(pattern=MODEL_NAME_PATTERN, description="The evaluated model's name.")],
    files: Annotated[list[UploadFile], File(description="One or more samples_<task>_<date>.jsonl files.")],
    metric: Annotated[str | None, Form(description="Metric key; default the first of each line's `metrics`.")] = None,
    filter: Annotated[str | None,
                      Form(description="lm-eval filter; default 'none' if present, else the first.")] = None,
) -> ImportSummary | JSONResponse:
    """Import `lm_eval --log_samples` files: a benchmark per task, items keyed by `doc_id`, the model's scores."""
    total = sum(f.size or 0 for f in files)
    for f in files:
        task_from_filename(f.filename or "")  # fail fast on a bad name, before any work

    if total > settings.inline_import_max_bytes:
        def enqueue() -> tuple[str, str]:
            inputs = []
            for f in files:
                f.file.seek(0)
                inputs.append((f.filename or "", f.file.read()))
            job = import_service.start_import_job(session, model, metric, filter, inputs)
            session.commit()
            return job.id, job.queue

        job_id, queue = await run_in_threadpool(enqueue)
        jobs.submit(job_id, queue)
        return accepted(JobAccepted(job=JobRef(id=job_id, status="queued")), f"/v1/jobs/{job_id}")

    def work() -> dict[str, Any]:
        for f in files:
            f.file.seek(0)
        logs = import_service.parse_logs(((f.filename or "", f.file) for f in files), metric, filter)
        result = import_service.store_logs(session, model, logs)
        session.commit()
        return result

    if not files:
        raise InvalidInput("no files", [{"field": "files", "detail": "at least one file"}])
    return ImportSummary.model_validate(await run_in_threadpool(work))
