"""Recording a coreset job's outcome: the ranked items and diagnostics, or the failure.

Shared by the text, score-based and RepCore selection jobs.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert

from app.db.models import Coreset, CoresetItem
from app.services.jobs import JobContext


def save_selection(ctx: JobContext, coreset_id: str, rows: list[dict[str, Any]], diagnostics: dict[str, Any],
                   params: dict[str, Any] | None = None) -> None:
    """Replace the coreset's items with ``rows`` and mark it ready (``params``: resolved, e.g. tuned alpha)."""
    with ctx.session_factory() as session:
        coreset = session.get(Coreset, coreset_id, with_for_update=True)
        session.execute(delete(CoresetItem).where(CoresetItem.coreset_id == coreset_id))
        if rows:
            session.execute(insert(CoresetItem), rows)
        if params is not None:
            coreset.params = params
        coreset.status, coreset.diagnostics, coreset.error = "ready", diagnostics, None
        session.commit()


def mark_coreset_failed(ctx: JobContext, coreset_id: str, exc: Exception) -> None:
    """Record why a coreset's job failed on the coreset itself (the job keeps its own error)."""
    with ctx.session_factory() as session:
        coreset = session.get(Coreset, coreset_id)
        if coreset is not None:
            coreset.status = "failed"
            coreset.error = {"title": type(exc).__name__, "detail": str(exc)}
            session.commit()
