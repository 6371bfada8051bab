"""The selection jobs: one handler for every family's job kind, dispatched through the registry."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from evalplan.coresets.registry import FAMILIES, family_of
from evalplan.coresets.repository import mark_coreset_failed
from evalplan.db.models import Coreset
from evalplan.kit.jobs import JobContext, register


def run_selection(ctx: JobContext) -> dict[str, Any]:
    """Run the coreset's family's selection; a failure is recorded on the coreset too."""
    coreset_id = ctx.payload["coreset_id"]
    try:
        with ctx.session_factory() as session:
            method = session.scalar(select(Coreset.method).where(Coreset.id == coreset_id))
        if method is None:
            raise LookupError(f"coreset {coreset_id} vanished")
        return family_of(method).select(ctx, coreset_id)
    except Exception as exc:
        mark_coreset_failed(ctx, coreset_id, exc)
        raise


for kind, queue in sorted({(family.job_kind, family.queue) for family in FAMILIES}):
    register(kind, queue)(run_selection)
