"""The import jobs: a large import, parsed and stored in a worker by the one pipeline (``evalplan.imports.harness``).

``lm_eval_import`` (an lm-eval import: the kind its callers see) and ``harness_import`` (inspect_ai, HELM,
lighteval) differ only in their payload and answer.
"""

from __future__ import annotations

from typing import Any

from evalplan.imports import harness
from evalplan.kit.db import begin_write
from evalplan.kit.jobs import JobContext, register
from evalplan.kit.settings import get_settings


@register(harness.LM_EVAL_KIND, queue="cpu")
def run_lm_eval_import(ctx: JobContext) -> dict[str, Any]:
    """A large lm-eval import: parse every samples file, then store all of its tasks in one transaction."""
    options = ctx.payload
    parsed = harness.parse_lm_eval(((name, content.splitlines()) for name, content in ctx.inputs()), options)
    ctx.progress(0.5)
    with ctx.session_factory() as session:
        result = harness.store_lm_eval(begin_write(session), options["model"], parsed,
                                       allow_foreign_items=bool(options.get("allow_foreign_items")))
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
