"""The ``lm_eval_import`` job: a large lm-eval import, parsed and stored in a worker."""

from __future__ import annotations

from typing import Any

from evalplan.imports import harness
from evalplan.imports.service import KIND, parse_logs, store_logs
from evalplan.kit.db import begin_write
from evalplan.kit.jobs import JobContext, register
from evalplan.kit.settings import get_settings


@register(KIND, queue="cpu")
def run_lm_eval_import(ctx: JobContext) -> dict[str, Any]:
    files = ctx.inputs()
    logs = parse_logs(((name, content.splitlines()) for name, content in files),
                      ctx.payload.get("metric"), ctx.payload.get("filter"))
    ctx.progress(0.5)
    with ctx.session_factory() as session:
        result = store_logs(begin_write(session), ctx.payload["model"], logs,
                            allow_foreign_items=bool(ctx.payload.get("allow_foreign_items")))
        session.commit()
    return result


@register(harness.KIND, queue="cpu")
def run_harness_import(ctx: JobContext) -> dict[str, Any]:
    """A large inspect_ai / HELM / lighteval import: parse every file, then store all of it in one transaction."""
    options = ctx.payload.get("options") or {}
    parsed = harness.parse(ctx.payload["harness"], ctx.inputs(), options, get_settings().max_decompressed_bytes)
    ctx.progress(0.5)
    with ctx.session_factory() as session:
        result = harness.store(begin_write(session), parsed,
                               allow_foreign_items=bool(options.get("allow_foreign_items")))
        session.commit()
    return result
