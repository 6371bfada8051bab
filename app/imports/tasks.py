"""The ``lm_eval_import`` job: a large lm-eval import, parsed and stored in a worker."""

from __future__ import annotations

from typing import Any

from app.imports.service import KIND, parse_logs, store_logs
from app.kit.jobs import JobContext, register


@register(KIND, queue="cpu")
def run_lm_eval_import(ctx: JobContext) -> dict[str, Any]:
    files = ctx.inputs()
    logs = parse_logs(((name, content.splitlines()) for name, content in files),
                      ctx.payload.get("metric"), ctx.payload.get("filter"))
    ctx.progress(0.5)
    with ctx.session_factory() as session:
        result = store_logs(session, ctx.payload["model"], logs)
        session.commit()
    return result
