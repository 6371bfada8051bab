"""Deleting a team (``DELETE /v1/teams/{team}``, the bootstrap admin only): all of it, or nothing.

A team goes with everything it owns — tokens, benchmarks (items, scores, embeddings, hidden states),
models, coresets, sessions, jobs, benchmark selections — in one transaction, each resource under the
rules of its own ``DELETE``. It is refused with 409, naming what blocks it, while

* the team owns a published coreset (a published version is never deleted: other teams may pin it);
* another team's published coreset is built on one of its (public) benchmarks or uses one of its
  models as a reference, or another team's coreset or session is built on one of its benchmarks
  (those are not the team's to delete);
* one of its jobs is queued or running (cancel it first: a running job would write into deleted rows).

The built-in team ``local`` is never deleted. The team's audit entries stay (they are history); the
deletion itself is recorded in the deleting admin's log (``GET /v1/audit``) with what went.

Every domain's part goes through its own rules and its own ``repository.py``, registered here because
auth is below them in the dependency order (docs/ARCHITECTURE.md): ``register_team_part`` (what the domain
deletes of the team, in ``TEAM_PARTS`` order), ``register_team_blockers`` (what of the domain blocks it) and the
readers of ``evalplan.auth.dependents``; ``evalplan.sessions.cache`` registers how deleted sessions leave its
cache (``on_sessions_deleted``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import delete, select, text
from sqlalchemy.orm import Session

from evalplan.auth.audit import record
from evalplan.auth.caller import SCOPES, Caller
from evalplan.auth.dependents import reader
from evalplan.auth.scoping import CALLER_KEY, bind_caller, caller_of
from evalplan.db.models import LOCAL_TEAM_ID, ApiToken, Team
from evalplan.kit.errors import Conflict
from evalplan.kit.repository import delete_team_jobs, team_job_ids

ACTIVE_JOBS = ("queued", "running")
_Part = TypeVar("_Part")

#: the domains' parts of a team deletion, in the order they go (sessions and coresets before the benchmarks they
#: are built on; jobs last: coresets point at theirs); ``jobs`` is the job runtime's own (``evalplan.kit``)
TEAM_PARTS = ("sessions", "coresets", "benchmark_selections", "benchmarks", "models")
#: the parts after which the deletions so far are flushed
_FLUSH_AFTER = ("benchmark_selections",)
#: domain -> what it deletes of a team: ``(session, team id) -> what went`` (one entry per deleted row)
_TEAM_PARTS: dict[str, Callable[[Session, str], list[Any]]] = {}
#: domain -> what of it blocks a team deletion: ``(session, team, the team's published coresets) -> blockers``
_TEAM_BLOCKERS: dict[str, Callable[[Session, Team, list[str]], list[dict[str, Any]]]] = {}
#: the domains whose rows can block a team deletion, in the order they are reported (after its published coresets
#: and its running jobs)
TEAM_BLOCKERS = ("benchmarks", "models")
#: called with ``[(session id, n_observed)]`` of the deleted sessions after the deletion (caches)
_ON_SESSIONS_DELETED: list[Callable[[list[tuple[str, int]]], None]] = []


def register_team_part(domain: str, part: Callable[[Session, str], list[Any]]) -> None:
    """Team deletion deletes ``domain``'s rows of the team with ``part`` (one of ``TEAM_PARTS``)."""
    if domain not in TEAM_PARTS:
        raise ValueError(f"{domain!r} is not one of TEAM_PARTS")
    _TEAM_PARTS[domain] = part


def register_team_blockers(domain: str, blockers: Callable[[Session, Team, list[str]], list[dict[str, Any]]]
                           ) -> None:
    """What of ``domain`` (one of ``TEAM_BLOCKERS``) keeps a team from being deleted."""
    if domain not in TEAM_BLOCKERS:
        raise ValueError(f"{domain!r} is not one of TEAM_BLOCKERS")
    _TEAM_BLOCKERS[domain] = blockers


def on_sessions_deleted(callback: Callable[[list[tuple[str, int]]], None]) -> None:
    """Call ``callback`` with the deleted sessions' ``(id, n_observed)`` after a team deletion."""
    _ON_SESSIONS_DELETED.append(callback)


def _registered(table: dict[str, _Part], domain: str) -> _Part:
    found = table.get(domain)
    if found is None:  # a process that deletes teams imports the domains (evalplan.main does)
        raise RuntimeError(f"no team deletion part registered for {domain}: import its domain's repository")
    return found


def write_first(session: Session) -> None:
    """On SQLite, make the transaction's first statement a write so it holds the write lock before it
    reads (a deferred transaction that read first cannot upgrade after another writer committed, and a
    deletion reads a lot before it writes). Call it before anything else; a no-op elsewhere."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(text("UPDATE teams SET name = name WHERE 1 = 0"))


def _blockers(session: Session, team: Team) -> list[dict[str, Any]]:
    """What keeps ``team`` from being deleted (the session is bound to the team)."""
    found: list[dict[str, Any]] = []
    published: list[str] = reader("team_published_coresets")(session, team.id)
    if published:
        found.append({"detail": f"the team owns {len(published)} published coreset(s): published versions are "
                                "never deleted (other teams may pin them)", "coresets": sorted(published)})
    active = team_job_ids(session, team.id, ACTIVE_JOBS)
    if active:
        found.append({"detail": f"{len(active)} job(s) of the team are queued or running: cancel them first",
                      "jobs": sorted(active)})
    for domain in TEAM_BLOCKERS:
        found += _registered(_TEAM_BLOCKERS, domain)(session, team, published)
    return found


def delete_team(session: Session, team: Team) -> dict[str, int]:
    """Delete ``team`` and everything it owns (see the module docstring); how many of each went.
    The caller commits."""
    if team.id == LOCAL_TEAM_ID:
        raise Conflict("the built-in team 'local' cannot be deleted",
                       [{"parameter": "team", "detail": "local is the team of EVALPLAN_AUTH=off"}])
    parts = [_registered(_TEAM_PARTS, domain) for domain in TEAM_PARTS]
    admin = caller_of(session)
    acting = Caller(team=team.name, team_id=team.id, scopes=frozenset(SCOPES),
                    actor=admin.actor if admin is not None else "local",
                    token_id=admin.token_id if admin is not None else None)
    bind_caller(session, acting)  # the team's own rows become writable (evalplan.auth.scoping)
    session_ids: list[tuple[str, int]] = []
    try:
        blockers = _blockers(session, team)
        if blockers:
            raise Conflict(f"team {team.name!r} cannot be deleted: {len(blockers)} thing(s) depend on it or are "
                           "running", [{"parameter": "team", **b} for b in blockers])
        counts: dict[str, int] = {}
        for domain, part in zip(TEAM_PARTS, parts, strict=True):
            gone = part(session, team.id)
            if domain == "sessions":
                session_ids = gone
            counts[domain] = len(gone)
            if domain in _FLUSH_AFTER:
                session.flush()
        counts["jobs"] = delete_team_jobs(session, team.id)
        session.flush()
        counts["tokens"] = len(list(session.scalars(select(ApiToken.id).where(ApiToken.team_id == team.id))))
        session.execute(delete(ApiToken).where(ApiToken.team_id == team.id))
    finally:
        if admin is not None:
            bind_caller(session, admin)
        else:
            session.info.pop(CALLER_KEY, None)
    detail: dict[str, Any] = dict(counts)
    record(session, "delete", "team", team.id, name=team.name, **detail)
    session.delete(team)
    session.flush()
    for callback in _ON_SESSIONS_DELETED:  # their estimators leave this process's cache
        callback(session_ids)
    return counts
