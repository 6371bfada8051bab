"""The audit log: who created, published, deprecated, changed the visibility of, or deleted what.

``record`` adds an entry in the caller's transaction (so an entry exists exactly when the change
commits); team admins read their team's entries with ``GET /v1/audit``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from evalplan.auth.scoping import caller_of, require_own, team_of
from evalplan.db.models import AuditEntry, TeamOwned


def record(session: Session, action: str, resource_type: str, resource_id: str, team_id: str | None = None,
           **detail: Any) -> AuditEntry:
    """Add one entry (``action``: create, publish, deprecate, visibility, delete, revoke, ...)."""
    caller = caller_of(session)
    entry = AuditEntry(team_id=team_id or team_of(session), actor=caller.actor if caller else "local",
                       token_id=caller.token_id if caller else None, action=action, resource_type=resource_type,
                       resource_id=resource_id, detail=detail)
    session.add(entry)
    return entry


def change_visibility(session: Session, row: TeamOwned, visibility: str, resource_type: str, label: str) -> None:
    """``PATCH {"visibility"}`` of a team-owned resource: 403 unless the caller's team owns it; audited
    when it changes."""
    require_own(session, row, label)
    if row.visibility != visibility:
        record(session, "visibility", resource_type, str(getattr(row, "id", "")), was=row.visibility, now=visibility)
        row.visibility = visibility
    session.flush()
