"""Resolving ``{benchmark}`` / ``{model}`` references across teams (API.md "Teams and tokens").

A reference is an id, a name or ``team/name``. Under the session's team scoping
(``evalplan.auth.scoping``) the candidates are the caller's own rows and public ones:

1. an id names that row;
2. a name is the caller's own row of that name first, then the one public row of that name; two or
   more public rows of that name (of other teams) are 409, listing the candidates as ``team/name``;
3. ``team/name`` (URL-encoded ``team%2Fname`` in a path), where ``team`` is the name of a team, names
   that team's row ``name`` when readable, and nothing else: never a row of another team whose stored
   name happens to be ``team/name`` (issue 24: new names never start with a team's name,
   ``evalplan.auth.names``; a look-alike stored before is reached as ``owner/team/name`` or by id);
4. a name with ``/`` whose first part is no team (``meta-llama/Llama-3-8B``) is an ordinary name (2.).

Another team's private row is never a candidate, so it answers 404 like a missing one.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from evalplan.auth.names import check_new_names
from evalplan.auth.scoping import owned_by_caller, require_own, team_of
from evalplan.db.ids import looks_like_id
from evalplan.db.models import LOCAL_TEAM_ID, Team, TeamOwned
from evalplan.kit.errors import Conflict, InvalidInput, NotFound

T = TypeVar("T", bound=TeamOwned)
ENCODED_SLASH = "%2F"  # evalplan.kit.middleware keeps an encoded '/' of a path segment as this


def normalize_ref(ref: str) -> str:
    return ref.replace(ENCODED_SLASH, "/").replace("%2f", "/")


def team_id_named(session: Session, name: str) -> str | None:
    """The id of the team called ``name`` (the built-in ``local`` team has the fixed id ``local``)."""
    if name == LOCAL_TEAM_ID:
        return LOCAL_TEAM_ID
    return session.scalar(select(Team.id).where(Team.name == name))


def find_named(session: Session, cls: type[T], ref: str, *, kind: str) -> T | None:
    """The row ``ref`` names among the readable ones (see the module docstring), or None."""
    ref = normalize_ref(ref)
    column: Any = cls
    if "/" in ref:
        team_name, _, name = ref.partition("/")
        team_id = team_id_named(session, team_name)
        if team_id is not None:  # team/name: that team's row, nothing else
            return session.scalars(select(cls).where(column.team_id == team_id, column.name == name)).first()
    rows = list(session.scalars(select(cls).where(or_(column.id == ref, column.name == ref))))
    return _choose(session, rows, ref, kind)


def find_named_many(session: Session, cls: type[T], refs: list[str], *, kind: str) -> dict[str, T | None]:
    """:func:`find_named` of each of ``refs`` (the same rule: id, then the caller's own row, then the one
    public row; ``team/name`` that team's), with one query for all the plain refs. Every lookup of a list
    of names goes through here, so a batch resolves exactly as one ref does (issue 32 item 6: a batch
    predict picked another team's public model over the caller's own of the same name)."""
    out: dict[str, T | None] = {}
    plain: list[str] = []
    for ref in dict.fromkeys(refs):
        norm = normalize_ref(ref)
        if "/" in norm and team_id_named(session, norm.partition("/")[0]) is not None:
            out[ref] = find_named(session, cls, ref, kind=kind)
        else:
            plain.append(ref)
    column: Any = cls
    candidates: dict[str, list[T]] = {normalize_ref(ref): [] for ref in plain}
    keys = list(candidates)
    for start in range(0, len(keys), 500):
        chunk = keys[start:start + 500]
        for row in session.scalars(select(cls).where(or_(column.id.in_(chunk), column.name.in_(chunk)))):
            for key in {row.id, row.name}:  # type: ignore[attr-defined]
                if key in candidates:
                    candidates[key].append(row)
    for ref in plain:
        out[ref] = _choose(session, candidates[normalize_ref(ref)], normalize_ref(ref), kind)
    return out


def _choose(session: Session, rows: list[T], ref: str, kind: str) -> T | None:
    """The row ``ref`` names among the readable ``rows`` matching it by id or name (module docstring, 1. and 2.)."""
    by_id = [r for r in rows if r.id == ref]  # type: ignore[attr-defined]
    if by_id:
        return by_id[0]
    own_team = team_of(session)
    own = [r for r in rows if r.team_id == own_team]
    if own:
        return own[0]
    if len(rows) == 1:
        return rows[0]
    if len(rows) > 1:
        teams = dict(session.execute(select(Team.id, Team.name).where(Team.id.in_({r.team_id for r in rows}))).all())
        candidates = sorted(f"{teams.get(r.team_id, r.team_id)}/{r.name}" for r in rows)  # type: ignore[attr-defined]
        raise Conflict(f"{kind} name {ref!r} is ambiguous: several teams publish it; name it as team/name",
                       [{"parameter": kind, "detail": "one of " + ", ".join(candidates), "candidates": candidates}])
    return None


def get_named(session: Session, cls: type[T], ref: str, *, kind: str, location: str = "parameter",
              write: bool = False, for_update: bool = False) -> T:
    """Like :func:`find_named`, 404 when nothing matches; ``write`` adds the owner check (403 for another
    team's public row); ``for_update`` locks the row."""
    row = find_named(session, cls, ref, kind=kind)
    if row is None:
        raise NotFound(f"{kind} {normalize_ref(ref)!r} does not exist",
                       [{location: kind, "detail": f"no {kind} with id or name {normalize_ref(ref)!r}"}])
    if write:
        require_own(session, row, f"{kind} {normalize_ref(ref)!r}")
    if for_update:
        column: Any = cls
        locked = session.scalars(select(cls).where(column.id == row.id).with_for_update()).first()  # type: ignore[attr-defined]
        assert locked is not None
        row = locked
    return row


def check_new_name(session: Session, column: Any, name: str, kind: str, field: str = "name") -> None:
    """A new benchmark or model name: 422 when it has the shape of a server id or is not a valid name
    (``evalplan.auth.names``), 409 when ``column`` has it."""
    check_new_names(session, [name], kind, field)
    if looks_like_id(name):
        raise InvalidInput(f"{name!r} has the shape of a server id; choose another {kind} name",
                           [{"field": "name", "detail": "names may not look like ids (prefix_ + 24 hex digits)"}])
    stmt = select(column).where(column == name)
    owner = getattr(column, "class_", None)
    if owner is not None and hasattr(owner, "team_id"):
        stmt = stmt.where(owned_by_caller(session, owner))  # names are unique per team
    if session.scalars(stmt).first() is not None:
        raise Conflict(f"a {kind} named {name!r} already exists",
                       [{"field": "name", "detail": f"{kind} names are unique per team"}])
