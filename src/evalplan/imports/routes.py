"""Imports from evaluation harnesses (``POST /v1/imports/{lm-eval,inspect,helm,lighteval}``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from evalplan.auth.deps import DbSession
from evalplan.db.models import Job
from evalplan.imports import harness
from evalplan.imports.schemas import HarnessImportSummary, ImportSummary
from evalplan.integrations.lm_eval import task_from_filename
from evalplan.kit.deps import AppSettings, JobQueue, accepted
from evalplan.kit.errors import InvalidInput
from evalplan.kit.schemas import MODEL_NAME_PATTERN, JobAccepted, JobRef

router = APIRouter(prefix="/v1/imports", tags=["imports"])
_Summary = TypeVar("_Summary", bound=BaseModel)
_FOREIGN = ("Into an existing benchmark that holds items, none of which the import names (another task's "
            "items): true adds them anyway; default false answers 409.")


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
    allow_foreign_items: Annotated[bool, Form(description=_FOREIGN)] = False,
) -> ImportSummary | JSONResponse:
    """Import `lm_eval --log_samples` files: a benchmark per task, items keyed by `doc_id`, the model's scores."""
    if not files:
        raise InvalidInput("no files", [{"field": "files", "detail": "at least one file"}])
    for f in files:
        task_from_filename(f.filename or "")  # fail fast on a bad name, before any work

    options: dict[str, Any] = {"model": model, "metric": metric, "filter": filter,
                               "allow_foreign_items": allow_foreign_items}

    def work() -> dict[str, Any]:
        for f in files:
            f.file.seek(0)
        parsed = harness.parse_lm_eval(((f.filename or "", f.file) for f in files), options)
        result = harness.store_lm_eval(session, model, parsed, allow_foreign_items=allow_foreign_items)
        session.commit()
        return result

    return await _inline_or_job(ImportSummary, session, settings, jobs, files,
                                lambda inputs: harness.start_job(session, "lm-eval", options, inputs), work)


def _read_all(files: list[UploadFile]) -> list[tuple[str, bytes]]:
    """``(filename, bytes)`` of every upload, each read from its start."""
    out = []
    for f in files:
        f.file.seek(0)
        out.append((f.filename or "", f.file.read()))
    return out


async def _inline_or_job(summary: type[_Summary], session: DbSession, settings: AppSettings, jobs: JobQueue,
                         files: list[UploadFile], start_job: Callable[[list[tuple[str, bytes]]], Job],
                         work: Callable[[], dict[str, Any]]) -> _Summary | JSONResponse:
    """Queue ``start_job(the uploads)`` (202 with the job) when the uploads total more than the inline
    limit, else run ``work`` (parse, store, commit) inline and answer its ``summary``."""
    if sum(f.size or 0 for f in files) > settings.inline_import_max_bytes:
        def enqueue() -> tuple[str, str]:
            job = start_job(_read_all(files))
            session.commit()
            return job.id, job.queue

        job_id, queue = await run_in_threadpool(enqueue)
        jobs.submit(job_id, queue)
        return accepted(JobAccepted(job=JobRef(id=job_id, status="queued")), f"/v1/jobs/{job_id}")
    return summary.model_validate(await run_in_threadpool(work))


async def _harness_import(harness_name: str, session: DbSession, settings: AppSettings, jobs: JobQueue,
                          files: list[UploadFile], options: dict[str, Any]) -> HarnessImportSummary | JSONResponse:
    """Parse and store the uploads inline, or queue a job when they total more than the inline limit."""
    if not files:
        raise InvalidInput("no files", [{"field": "files", "detail": "at least one file"}])
    options = {k: v for k, v in options.items() if v is not None}

    def work() -> dict[str, Any]:
        parsed = harness.parse(harness_name, _read_all(files), options, settings.max_decompressed_bytes)
        result = harness.store(session, parsed, allow_foreign_items=bool(options.get("allow_foreign_items")))
        session.commit()
        return result

    return await _inline_or_job(
        HarnessImportSummary, session, settings, jobs, files,
        lambda inputs: harness.start_job(session, harness_name, options, inputs), work)


_LARGE: dict[int | str, dict[str, Any]] = {
    202: {"model": JobAccepted, "description": "Large upload: imported by a job."}}
_STAT = ("Default `exact_match`, else the first of quasi_exact_match, final_number_exact_match, "
         "math_equiv_chain_of_thought")
_MODEL = "The evaluated model's name; default the model the log names."
_BENCHMARK = "The benchmark to import into (created if missing); default the task name."


@router.post("/inspect", status_code=201, response_model=HarnessImportSummary, responses=_LARGE)
async def import_inspect(
    session: DbSession,
    settings: AppSettings,
    jobs: JobQueue,
    files: Annotated[list[UploadFile], File(description="inspect_ai logs: `.eval` (or the older `.json`).")],
    model: Annotated[str | None, Form(pattern=MODEL_NAME_PATTERN, description=_MODEL)] = None,
    benchmark: Annotated[str | None, Form(description=_BENCHMARK)] = None,
    scorer: Annotated[str | None, Form(description="The scorer whose value is the score; default the first.")] = None,
    allow_foreign_items: Annotated[bool, Form(description=_FOREIGN)] = False,
) -> HarnessImportSummary | JSONResponse:
    """Import inspect_ai logs: sample `id` -> item, `value_to_float` of the scorer's value, epochs averaged."""
    return await _harness_import("inspect", session, settings, jobs, files,
                                 {"model": model, "benchmark": benchmark, "scorer": scorer,
                                  "allow_foreign_items": allow_foreign_items})


@router.post("/helm", status_code=201, response_model=HarnessImportSummary, responses=_LARGE)
async def import_helm(
    session: DbSession,
    settings: AppSettings,
    jobs: JobQueue,
    files: Annotated[list[UploadFile], File(
        description="A run's `per_instance_stats.json`, optionally its `scenario_state.json` (item text, model).")],
    model: Annotated[str | None, Form(pattern=MODEL_NAME_PATTERN,
                                      description="Default: `adapter_spec.model` of scenario_state.json.")] = None,
    benchmark: Annotated[str | None, Form(description="The benchmark; required unless run_spec.json is sent.")] = None,
    stat: Annotated[str | None, Form(description=_STAT)] = None,
    perturbed: Annotated[bool, Form(description="Also import perturbed instances (as `<id>@<perturbation>`).")] = False,
    allow_foreign_items: Annotated[bool, Form(description=_FOREIGN)] = False,
) -> HarnessImportSummary | JSONResponse:
    """Import a HELM run: `instance_id` -> item, the stat's mean, train trials averaged, perturbations skipped."""
    return await _harness_import("helm", session, settings, jobs, files,
                                 {"model": model, "benchmark": benchmark, "stat": stat, "perturbed": perturbed,
                                  "allow_foreign_items": allow_foreign_items})


@router.post("/lighteval", status_code=201, response_model=HarnessImportSummary, responses=_LARGE)
async def import_lighteval(
    session: DbSession,
    settings: AppSettings,
    jobs: JobQueue,
    files: Annotated[list[UploadFile], File(
        description="One lighteval `details_<task>_<date>.parquet`, optionally the run's `results_<date>.json`.")],
    model: Annotated[str | None, Form(pattern=MODEL_NAME_PATTERN, description="The model's name.")] = None,
    benchmark: Annotated[str | None, Form(description="The benchmark; default the task of the file name.")] = None,
    metric: Annotated[str | None, Form(description="The metric column; default the first.")] = None,
    split: Annotated[str | None, Form(description="The evaluated split (the details do not record it); "
                                      "default from the results_<date>.json sent with it.")] = None,
    allow_foreign_items: Annotated[bool, Form(description=_FOREIGN)] = False,
) -> HarnessImportSummary | JSONResponse:
    """Import lighteval details: `split/doc.id` -> item (ids repeat across splits), the metric's value."""
    return await _harness_import("lighteval", session, settings, jobs, files,
                                 {"model": model, "benchmark": benchmark, "metric": metric, "split": split,
                                  "allow_foreign_items": allow_foreign_items})
