"""Recording a coreset job's outcome: the ranked items, diagnostics and fitted state, or the failure.

Shared by the text, score-based and RepCore selection jobs. ``diagnostics`` is returned by
``GET /v1/coresets/{id}`` and stays small; what only predict needs (the score-based references'
coreset-score matrices) goes to the deferred ``fitted_state`` column (docs/DECISIONS.md).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert

from app.db.models import Coreset, CoresetItem
from app.kit.jobs import JobContext


def save_selection(ctx: JobContext, coreset_id: str, rows: list[dict[str, Any]], diagnostics: dict[str, Any],
                   params: dict[str, Any] | None = None, fitted_state: dict[str, Any] | None = None) -> None:
    """Replace the coreset's items with ``rows`` and mark it ready (``params``: resolved, e.g. tuned alpha;
    ``fitted_state``: what predict refits from, stored apart from ``diagnostics``)."""
    with ctx.session_factory() as session:
        coreset = session.get(Coreset, coreset_id, with_for_update=True)
        session.execute(delete(CoresetItem).where(CoresetItem.coreset_id == coreset_id))
        if rows:
            session.execute(insert(CoresetItem), rows)
        if params is not None:
            coreset.params = params
        if fitted_state is not None:
            coreset.fitted_state = fitted_state
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
