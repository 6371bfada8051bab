"""The ``embed`` job (queue ``gpu``): embed the missing item texts of some benchmarks."""

from __future__ import annotations

from typing import Any

from evalplan.embeddings.service import KIND, ensure_embeddings
from evalplan.kit.jobs import JobContext, register
from evalplan.kit.settings import get_settings


@register(KIND, queue="gpu")
def run_embed(ctx: JobContext) -> dict[str, Any]:
    """Embed the missing item texts of ``payload.benchmark_ids`` with ``payload.model``."""
    model_name = ctx.payload.get("model") or get_settings().embedding_model
    return ensure_embeddings(ctx.session_factory, ctx.payload["benchmark_ids"], model_name, progress=ctx.progress)
