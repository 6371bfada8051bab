"""The ``benchmark_similarity`` job (queue ``gpu``): embed what is missing, then compute the matrix."""

from __future__ import annotations

from typing import Any

from evalplan.embeddings.service import ensure_embeddings
from evalplan.kit.jobs import JobContext, register
from evalplan.similarity.service import KIND, compute


@register(KIND, queue="gpu")
def run_benchmark_similarity(ctx: JobContext) -> dict[str, Any]:
    ids, model = ctx.payload["benchmark_ids"], ctx.payload["model"]
    ensure_embeddings(ctx.session_factory, ids, model, progress=lambda f: ctx.progress(0.8 * f))
    with ctx.session_factory() as session:
        result = compute(session, ids, model)
    return {**result, "signature": ctx.payload["signature"]}
