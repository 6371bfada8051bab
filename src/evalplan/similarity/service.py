"""Benchmark-benchmark similarity from prompt text (papers/000 end of §4.4): the matrix M of
eq. 12 and the conditional ordering of eq. 13, inline when small, else as a job."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy.orm import Session

from evalplan.benchmarks.repository import content_hashes, names_by_id, prompt_count
from evalplan.benchmarks.service import get_benchmarks
from evalplan.core.benchmarks.benchmark_similarity import benchmark_ordering, benchmark_similarity
from evalplan.db.models import Benchmark, Job
from evalplan.embeddings.repository import load_embeddings
from evalplan.kit.errors import InvalidInput
from evalplan.kit.jobs import create_job
from evalplan.kit.repository import recent_jobs

KIND = "benchmark_similarity"
INLINE_MAX_ITEMS = 2000


def _signature(session: Session, benchmarks: list[Benchmark], model: str) -> str:
    """Changes whenever an item of these benchmarks is added or its text changes."""
    digest = hashlib.sha256(json.dumps([model, [b.embedding_fields for b in benchmarks]]).encode())
    for b in benchmarks:
        digest.update(b.id.encode())
        for content_hash in content_hashes(session, b.id):
            digest.update((content_hash or "-").encode())
    return digest.hexdigest()


def compute(session: Session, benchmark_ids: list[str], model: str) -> dict[str, Any]:
    _, labels, embeddings = load_embeddings(session, benchmark_ids, model)
    names = names_by_id(session, benchmark_ids)
    matrix = benchmark_similarity(embeddings, labels)
    order, gains = benchmark_ordering(matrix)
    return {
        "model": model,
        "benchmarks": [names[b] for b in benchmark_ids],
        "matrix": [[float(v) for v in row] for row in matrix],
        "ordering": [{"rank": r + 1, "benchmark": names[benchmark_ids[int(b)]], "gain": float(g)}
                     for r, (b, g) in enumerate(zip(order, gains))],
    }


def similarity_or_job(session: Session, refs: list[str], model: str) -> tuple[dict[str, Any] | None, Job | None, bool]:
    """(result, None, False) when cached or small enough to compute now, else (None, job, created)."""
    if len(refs) < 2:
        raise InvalidInput("name at least two benchmarks", [{"parameter": "benchmarks", "detail": f"got {len(refs)}"}])
    benchmarks = get_benchmarks(session, refs, location="parameter")
    ids = [b.id for b in benchmarks]
    for b in benchmarks:
        if not prompt_count(session, b.id):
            raise InvalidInput(f"benchmark {b.name!r} has no item text", [{"parameter": "benchmarks",
                                                                           "benchmark": b.name,
                                                                          "detail": "upload items with prompts"}])
    signature = _signature(session, benchmarks, model)
    for job in recent_jobs(session, KIND, 50):
        if (job.payload or {}).get("signature") != signature:
            continue
        if job.status == "succeeded":
            return job.result, job, False
        if job.status in ("queued", "running"):
            return None, job, False
    n_items = sum(prompt_count(session, b) for b in ids)
    if n_items <= INLINE_MAX_ITEMS:
        try:
            return compute(session, ids, model), None, False
        except InvalidInput:
            pass  # embeddings missing: compute them in a job
    job = create_job(session, KIND, {"benchmark_ids": ids, "model": model, "signature": signature})
    return None, job, True
