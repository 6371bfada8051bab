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

Benchmarks and models go through their own domain's ``DELETE`` rules, which those domains register here
(``register_row_deleter``, done by ``evalplan.benchmarks.service`` and ``evalplan.models.service`` when
imported), and ``evalplan.sessions.cache`` registers how deleted sessions leave its cache: auth, below
them in the dependency order (docs/ARCHITECTURE.md), imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import delete, select, text
from sqlalchemy.orm import Session

from evalplan.auth.audit import record
from evalplan.auth.caller import SCOPES, Caller
from evalplan.auth.dependents import foreign_dependents, published_dependents
from evalplan.auth.scoping import CALLER_KEY, bind_caller, caller_of
from evalplan.db.models import (
    LOCAL_TEAM_ID,
    ApiToken,
    Benchmark,
    BenchmarkSelection,
    Coreset,
    CoresetItem,
    EvalSession,
    Job,
    Model,
    Team,
)
from evalplan.kit.errors import Conflict

ACTIVE_JOBS = ("queued", "running")

#: table -> how its domain deletes one row under the rules of its own ``DELETE`` (registered by the domain)
_ROW_DELETERS: dict[type[Any], Callable[[Session, Any], None]] = {}
#: called with ``[(session id, n_observed)]`` of the deleted sessions after the deletion (caches)
_ON_SESSIONS_DELETED: list[Callable[[list[tuple[str, int]]], None]] = []


def register_row_deleter(table: type[Any], deleter: Callable[[Session, Any], None]) -> None:
    """Team deletion deletes each row of ``table`` with ``deleter`` (e.g. ``Benchmark``: ``delete_benchmark``)."""
    _ROW_DELETERS[table] = deleter


def on_sessions_deleted(callback: Callable[[list[tuple[str, int]]], None]) -> None:
    """Call ``callback`` with the deleted sessions' ``(id, n_observed)`` after a team deletion."""
    _ON_SESSIONS_DELETED.append(callback)


def _row_deleter(table: type[Any]) -> Callable[[Session, Any], None]:
    deleter = _ROW_DELETERS.get(table)
    if deleter is None:  # a process that deletes teams imports the domains (evalplan.main does)
        raise RuntimeError(f"no deleter registered for {table.__name__} rows: import its domain's service")
    return deleter


def write_first(session: Session) -> None:
    """On SQLite, make the transaction's first statement a write so it holds the write lock before it
    reads (a deferred transaction that read first cannot upgrade after another writer committed, and a
    deletion reads a lot before it writes). Call it before anything else; a no-op elsewhere."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(text("UPDATE teams SET name = name WHERE 1 = 0"))


def _blockers(session: Session, team: Team) -> list[dict[str, Any]]:
    """What keeps ``team`` from being deleted (the session is bound to the team)."""
    found: list[dict[str, Any]] = []
    published = list(session.scalars(select(Coreset.id).where(Coreset.team_id == team.id,
                                                              Coreset.published_at.isnot(None))))
    if published:
        found.append({"detail": f"the team owns {len(published)} published coreset(s): published versions are "
                                "never deleted (other teams may pin them)", "coresets": sorted(published)})
    active = list(session.scalars(select(Job.id).where(Job.team_id == team.id, Job.status.in_(ACTIVE_JOBS))))
    if active:
        found.append({"detail": f"{len(active)} job(s) of the team are queued or running: cancel them first",
                      "jobs": sorted(active)})
    for benchmark in session.scalars(select(Benchmark).where(Benchmark.team_id == team.id)):
        foreign_published = [c for c in published_dependents(session, benchmark_id=benchmark.id)
                             if c not in published]
        others = foreign_dependents(session, benchmark)
        if foreign_published or others:
            found.append({"detail": f"benchmark {benchmark.name!r}: {len(set(foreign_published) | set(others))} "
                                    "coreset(s) or session(s) of other teams are built on it",
                          "benchmark": benchmark.name})
    for model in session.scalars(select(Model).where(Model.team_id == team.id)):
        foreign_published = [c for c in published_dependents(session, model=model) if c not in published]
        if foreign_published:
            found.append({"detail": f"model {model.name!r}: {len(foreign_published)} published coreset(s) of other "
                                    "teams use it as a reference model", "model": model.name})
    return found


def delete_team(session: Session, team: Team) -> dict[str, int]:
    """Delete ``team`` and everything it owns (see the module docstring); how many of each went.
    The caller commits."""
    if team.id == LOCAL_TEAM_ID:
        raise Conflict("the built-in team 'local' cannot be deleted",
                       [{"parameter": "team", "detail": "local is the team of EVALPLAN_AUTH=off"}])
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
        sessions = list(session.scalars(select(EvalSession).where(EvalSession.team_id == team.id)))
        session_ids = [(s.id, s.n_observed) for s in sessions]
        for row in sessions:
            session.delete(row)
        counts["sessions"] = len(sessions)
        coresets = list(session.scalars(select(Coreset.id).where(Coreset.team_id == team.id)))
        if coresets:
            session.execute(delete(CoresetItem).where(CoresetItem.coreset_id.in_(coresets)))
            for coreset in session.scalars(select(Coreset).where(Coreset.id.in_(coresets))):
                session.delete(coreset)
        counts["coresets"] = len(coresets)
        selections = list(session.scalars(select(BenchmarkSelection).where(BenchmarkSelection.team_id == team.id)))
        for selection in selections:
            session.delete(selection)
        counts["benchmark_selections"] = len(selections)
        session.flush()
        benchmarks = list(session.scalars(select(Benchmark).where(Benchmark.team_id == team.id)))
        for benchmark in benchmarks:
            _row_deleter(Benchmark)(session, benchmark)
        counts["benchmarks"] = len(benchmarks)
        models = list(session.scalars(select(Model).where(Model.team_id == team.id)))
        for model in models:
            _row_deleter(Model)(session, model)
        counts["models"] = len(models)
        jobs = list(session.scalars(select(Job).where(Job.team_id == team.id)))
        for job in jobs:
            session.delete(job)
        counts["jobs"] = len(jobs)
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
