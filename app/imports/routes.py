"""Imports from evaluation harnesses."""

from __future__ import annotations

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from app.kit.deps import SessionDep, submit_job
from app.kit.errors import InvalidInput
from app.kit.schemas import MODEL_NAME_PATTERN
from app.imports import service as import_service
from app.kit.jobs import create_job

router = APIRouter(prefix="/v1/imports", tags=["imports"])


@router.post("/lm-eval", status_code=201, responses={202: {"description": "Large upload: imported by a job."}})
async def import_lm_eval(
    request: Request,
    model: str = Form(..., pattern=MODEL_NAME_PATTERN, description="The evaluated model's name."),
    files: list[UploadFile] = File(..., description="One or more samples_<task>_<date>.jsonl files."),
    metric: str | None = Form(None, description="Metric key; default the first of each line's `metrics`."),
    filter: str | None = Form(None, description="lm-eval filter; default 'none' if present, else the first."),
    session: Session = SessionDep,
) -> JSONResponse:
    """Import `lm_eval --log_samples` files: a benchmark per task, items keyed by `doc_id`, the model's scores."""
    settings = request.app.state.settings
    total = sum(f.size or 0 for f in files)
    names = [f.filename or "" for f in files]
    for name in names:
        import_service.task_from_filename(name)  # fail fast on a bad name, before any work

    if total > settings.inline_import_max_bytes:
        def enqueue() -> tuple[str, str]:
            inputs = []
            for f in files:
                f.file.seek(0)
                inputs.append((f.filename or "", f.file.read()))
            job = create_job(session, import_service.KIND, {"model": model, "metric": metric, "filter": filter},
                             inputs=inputs)
            session.commit()
            return job.id, job.queue

        job_id, queue = await run_in_threadpool(enqueue)
        submit_job(request, job_id, queue)
        return JSONResponse({"job": {"id": job_id, "status": "queued"}}, status_code=202,
                            headers={"Location": f"/v1/jobs/{job_id}"})

    def work() -> dict:
        for f in files:
            f.file.seek(0)
        logs = import_service.parse_logs(((f.filename or "", f.file) for f in files), metric, filter)
        result = import_service.store_logs(session, model, logs)
        session.commit()
        return result

    if not files:
        raise InvalidInput("no files", [{"field": "files", "detail": "at least one file"}])
    return JSONResponse(await run_in_threadpool(work), status_code=201)
