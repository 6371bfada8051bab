"""Benchmarks, their items, their scores and score statistics (API.md "Data")."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from evalplan.auth.deps import DbSession
from evalplan.auth.naming import normalize_ref
from evalplan.auth.teams import team_name, team_names
from evalplan.benchmarks import items as item_service
from evalplan.benchmarks import responses as response_service
from evalplan.benchmarks import scores as score_service
from evalplan.benchmarks import service as benchmark_service
from evalplan.benchmarks import stats as stats_service
from evalplan.benchmarks.schemas import (
    BenchmarkCreate,
    BenchmarkList,
    BenchmarkOut,
    ItemList,
    ItemOut,
    ItemUploadResult,
    ResponseList,
    ResponseOut,
    ScoreCell,
    ScoreList,
    ScoreStats,
    ScoreUploadResult,
)
from evalplan.kit.deps import JobQueue, Pagination
from evalplan.kit.errors import UnsupportedMediaType
from evalplan.kit.schemas import JobAccepted, VisibilityPatch
from evalplan.models.service import get_model

router = APIRouter(prefix="/v1/benchmarks", tags=["benchmarks"])

Metric = Annotated[str | None, Query(description="Score metric; default the benchmark's default_metric ('score').")]


def attachment(filename: str) -> str:
    """A Content-Disposition header (RFC 6266) for any name: an ASCII fallback plus the UTF-8 ``filename*``."""
    fallback = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in filename)
    return f'attachment; filename="{fallback}"; filename*=UTF-8\'\'{quote(filename, safe="")}'


def benchmark_out(v: benchmark_service.BenchmarkView, team: str | None = None) -> BenchmarkOut:
    b = v.benchmark
    return BenchmarkOut(
        id=b.id, name=b.name, capability=b.capability, description=b.description,
        embedding_fields=list(b.embedding_fields or []), score_kind=b.score_kind, score_min=b.score_min,
        score_max=b.score_max, default_metric=b.default_metric, data_version=b.data_version,
        n_items=v.n_items, n_models=v.n_models, created_at=b.created_at, team=team, visibility=b.visibility,
    )


@router.post("", status_code=201, response_model=BenchmarkOut)
def create_benchmark(body: BenchmarkCreate, session: DbSession) -> BenchmarkOut:
    benchmark = benchmark_service.create_benchmark(session, **body.model_dump())  # audited there
    session.commit()
    return benchmark_out(benchmark_service.BenchmarkView(benchmark, 0, 0), team_name(session, benchmark.team_id))


@router.get("", response_model=BenchmarkList)
def list_benchmarks(session: DbSession, page: Pagination,
                    capability: Annotated[str | None, Query()] = None) -> BenchmarkList:
    result = benchmark_service.list_benchmarks(session, limit=page.limit, cursor=page.cursor, capability=capability)
    names = team_names(session, {v.benchmark.team_id for v in result.items})
    return BenchmarkList(items=[benchmark_out(v, names[v.benchmark.team_id]) for v in result.items],
                         next_cursor=result.next_cursor)


@router.get("/{benchmark}", response_model=BenchmarkOut)
def read_benchmark(benchmark: str, session: DbSession) -> BenchmarkOut:
    bench = benchmark_service.get_benchmark(session, benchmark)
    return benchmark_out(benchmark_service.view(session, bench), team_name(session, bench.team_id))


@router.patch("/{benchmark}", response_model=BenchmarkOut)
def patch_benchmark(benchmark: str, body: VisibilityPatch, session: DbSession) -> BenchmarkOut:
    """Change the visibility (`private` or `public`); audited. Making it private is 409 while another
    team's coreset or session is built on it."""
    bench = benchmark_service.get_benchmark(session, benchmark, for_update=True)
    benchmark_service.set_visibility(session, bench, body.visibility)
    session.commit()
    return benchmark_out(benchmark_service.view(session, bench), team_name(session, bench.team_id))


@router.delete("/{benchmark}", status_code=204, response_class=Response)
def delete_benchmark(benchmark: str, session: DbSession) -> Response:
    """Delete the benchmark with its items, scores, model responses, hidden states, sessions and the team's
    unpublished coresets on it, all or nothing. 409 while a published coreset, or another team's coreset or
    session, is built on it. Audited."""
    bench = benchmark_service.get_benchmark(session, benchmark, for_update=True)
    benchmark_service.delete_benchmark(session, bench)
    session.commit()
    return Response(status_code=204)


@router.post("/{benchmark}/items", response_model=ItemUploadResult,
             openapi_extra={"requestBody": {"content": {
                 "application/x-ndjson": {"schema": {"type": "string"}},
                 "application/json": {"schema": {"type": "array", "items": {"type": "object"}}}}}})
async def upload_items(benchmark: str, request: Request, session: DbSession) -> ItemUploadResult:
    """Upload items as JSONL (`application/x-ndjson`) or a JSON list of `{id, prompt, target?, fields?}`."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in ("application/x-ndjson", "application/jsonl", "application/json", "text/plain"):
        raise UnsupportedMediaType(
            f"items must be sent as application/x-ndjson or application/json, got {media or 'no content type'!r}",
            [{"header": "Content-Type", "detail": media or "missing"}])
    body = await request.body()

    def work() -> dict[str, int]:
        bench = benchmark_service.get_benchmark(session, benchmark, for_update=True)
        records = item_service.parse_item_records(body, ndjson=media != "application/json")
        result = item_service.upsert_items(session, bench, records)
        session.commit()
        return result

    return ItemUploadResult(**await run_in_threadpool(work))


@router.get("/{benchmark}/items", response_model=ItemList)
def list_items(benchmark: str, session: DbSession, page: Pagination) -> ItemList:
    bench = benchmark_service.get_benchmark(session, benchmark)
    result = item_service.list_items(session, bench, limit=page.limit, cursor=page.cursor)
    return ItemList(
        items=[ItemOut(id=i.item_id, prompt=i.prompt, target=i.target, fields=i.fields, source_index=i.source_index,
                       content_hash=i.content_hash) for i in result.items],
        next_cursor=result.next_cursor,
    )


@router.get("/{benchmark}/items/{item_id:path}/responses", response_model=ResponseList)
def list_item_responses(benchmark: str, item_id: str, session: DbSession, page: Pagination,
                        model: Annotated[str | None, Query(description="Only this model's response (name or id).")]
                        = None) -> ResponseList:
    """What each model answered on the item, as the harness imports (lm-eval, inspect, HELM, lighteval) logged
    it: one entry per model the caller may read, ordered by model id, paginated. 404 for an unknown item or
    model. An item id holding `/` (lighteval's `<split>/<id>`) may be sent as is or as `%2F`."""
    bench = benchmark_service.get_benchmark(session, benchmark)
    item_id = normalize_ref(item_id)  # an encoded '/' stays %2F in the path (evalplan.kit.middleware)
    model_id = get_model(session, model).id if model is not None else None
    result = response_service.list_item_responses(session, bench, item_id, model_id=model_id, limit=page.limit,
                                                  cursor=page.cursor)
    return ResponseList(benchmark=bench.name, item=item_id,
                        items=[ResponseOut(**response_service.response_dict(r)) for r in result.items],
                        next_cursor=result.next_cursor)


@router.post("/{benchmark}/scores", response_model=ScoreUploadResult,
             openapi_extra={"requestBody": {"content": {
                 "text/csv": {"schema": {"type": "string"}},
                 "application/json": {"schema": {"type": "array",
                                                 "items": {"$ref": "#/components/schemas/ScoreCell"}}}}}})
async def upload_scores(benchmark: str, request: Request, session: DbSession,
                        metric: Metric = None) -> ScoreUploadResult:
    """Upload a wide CSV matrix or long JSON `[{model, item, score}]`; all-or-nothing upsert."""
    content_type = request.headers.get("content-type", "")
    body = await request.body()

    def work() -> dict[str, Any]:
        bench = benchmark_service.get_benchmark(session, benchmark, for_update=True)
        result = score_service.upload_scores(session, bench, body, content_type, metric,
                                             request.app.state.settings.max_items_per_upload)
        session.commit()
        return result

    return ScoreUploadResult(**await run_in_threadpool(work))


@router.get("/{benchmark}/scores", response_model=ScoreList,
            responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}}}})
def download_scores(benchmark: str, request: Request, session: DbSession, page: Pagination, metric: Metric = None,
                    format: Annotated[str | None, Query(pattern="^(csv|json)$")] = None) -> Response | ScoreList:
    """`Accept: text/csv` (or `format=csv`, the default): the wide matrix; `application/json`: long cells, paginated."""
    bench = benchmark_service.get_benchmark(session, benchmark)
    accept = request.headers.get("accept", "")
    wants_json = format == "json" or (format is None and "application/json" in accept and "text/csv" not in accept)
    if not wants_json:
        csv_text = score_service.download_csv(session, bench, metric)
        return Response(csv_text, media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": attachment(f"{bench.name}.scores.csv")})
    cells = score_service.list_score_cells(session, bench, metric, limit=page.limit, cursor=page.cursor)
    return ScoreList(items=[ScoreCell(model=r.name, item=r.item_id, score=r.value) for r in cells.items],
                     next_cursor=cells.next_cursor)


@router.get("/{benchmark}/stats", response_model=ScoreStats,
            responses={202: {"model": JobAccepted, "description": "Statistics are being computed; poll the job."}})
def score_stats(benchmark: str, session: DbSession, jobs: JobQueue, metric: Metric = None) -> ScoreStats | JSONResponse:
    """Validation and statistics of the score matrix: 200 when fresh for the current data, else 202 with a job."""
    bench = benchmark_service.get_benchmark(session, benchmark)
    stats, job, created = stats_service.stats_or_job(session, bench, metric)
    if stats is not None:
        return ScoreStats.model_validate(stats)
    assert job is not None
    return jobs.accepted(session, job, created)
