"""Benchmark similarity from prompt text (``GET /v1/benchmark-similarity``, papers/000 §4.4)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from evalplan.auth.deps import DbSession
from evalplan.kit.deps import AppSettings, JobQueue
from evalplan.kit.schemas import JobAccepted
from evalplan.similarity import service as similarity_service
from evalplan.similarity.schemas import BenchmarkSimilarity

router = APIRouter(prefix="/v1", tags=["coresets"])


@router.get("/benchmark-similarity", response_model=BenchmarkSimilarity, response_model_exclude_unset=True,
            responses={202: {"model": JobAccepted, "description": "Large or not yet embedded: poll the job."}})
def benchmark_similarity(
    session: DbSession,
    settings: AppSettings,
    jobs: JobQueue,
    benchmarks: Annotated[list[str], Query(description="Benchmark names or ids, repeated or comma-separated.")],
    model: Annotated[str | None, Query(description="Embedding model; default EVALPLAN_EMBEDDING_MODEL.")] = None,
) -> BenchmarkSimilarity | JSONResponse:
    """M_bb' = I_f(A_b; A_b') / min(f(A_b), f(A_b')) and the greedy benchmark-level FL ordering (eq. 13)."""
    refs = [r.strip() for value in benchmarks for r in value.split(",") if r.strip()]
    result, job, created = similarity_service.similarity_or_job(session, refs, model or settings.embedding_model)
    if result is not None:
        return BenchmarkSimilarity.model_validate(result)
    assert job is not None
    return jobs.accepted(session, job, created)
