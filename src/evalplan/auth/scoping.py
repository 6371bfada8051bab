"""Team scoping: the one mechanism every query goes through (API.md "Teams and tokens").

A request's database session carries its :class:`~evalplan.auth.caller.Caller` (``bind_caller``, done by
``evalplan.kit.deps.get_db``; job handlers get sessions bound to the job's team). Then, for every table
that inherits :class:`~evalplan.db.models.TeamOwned`:

* every ORM SELECT gets ``team_id = caller's OR visibility = 'public'`` in SQL
  (``with_loader_criteria``, so joins, ``session.get`` and column selects are scoped too: another
  team's private row is never loaded, hence 404 and absent from lists);
* every ORM UPDATE / DELETE statement gets ``team_id = caller's``;
* a new row is stamped with the caller's team; flushing a change to, or the deletion of, another
  team's (public) row raises :class:`~evalplan.kit.errors.Forbidden` (403): the safety net behind the
  explicit ``require_own`` checks of the write routes.

A session without a caller (migrations, tests' direct setup) is unscoped and its new rows belong to
``local``. Models are also readable when they have scores on a readable public benchmark: their
names label that benchmark's score matrix (so another team can name them as reference models).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event, or_, select
from sqlalchemy.orm import ORMExecuteState, Session, sessionmaker, with_loader_criteria
from sqlalchemy.sql.elements import ColumnElement

from evalplan.auth.caller import Caller
from evalplan.db.models import LOCAL_TEAM_ID, Benchmark, BenchmarkModel, Model, TeamOwned
from evalplan.kit.errors import Forbidden

CALLER_KEY = "evalplan.caller"


def bind_caller(session: Session, caller: Caller) -> Session:
    """Scope ``session`` to ``caller``'s team (reads: own or public; writes: own)."""
    session.info[CALLER_KEY] = caller
    return session


def scoped_factory(factory: sessionmaker[Session], caller: Caller) -> sessionmaker[Session]:
    """A session factory like ``factory`` whose sessions are bound to ``caller`` (a job runs as its team)."""
    kw = dict(factory.kw)
    kw["info"] = {**(kw.get("info") or {}), CALLER_KEY: caller}
    return sessionmaker(class_=factory.class_, **kw)


def job_caller(team_id: str) -> Caller:
    """Who a job acts as: its team, with write scope (it was authorized when it was created)."""
    return Caller(team=team_id, team_id=team_id, scopes=frozenset({"read", "write"}), actor=f"job of {team_id}")


def team_scoped_factory(factory: sessionmaker[Session], team_id: str) -> sessionmaker[Session]:
    """The sessions a job of ``team_id`` runs with (``evalplan.kit.jobs.run_job``'s ``team_scope``)."""
    return scoped_factory(factory, job_caller(team_id))


@contextmanager
def unscoped(session: Session) -> Iterator[Session]:
    """Lift the scoping inside the block: only for integrity checks across teams (dependents of a
    resource), whose rows are counted, never returned to the caller."""
    caller = session.info.pop(CALLER_KEY, None)
    try:
        yield session
    finally:
        if caller is not None:
            session.info[CALLER_KEY] = caller


def caller_of(session: Session) -> Caller | None:
    caller = session.info.get(CALLER_KEY)
    return caller if isinstance(caller, Caller) else None


def team_of(session: Session) -> str:
    """The team new rows of ``session`` belong to."""
    caller = caller_of(session)
    return caller.team_id if caller is not None else LOCAL_TEAM_ID


def owned_by_caller(session: Session, cls: Any) -> ColumnElement[bool]:
    """``cls.team_id = <the session's team>``: add it to a query that must see only the caller's own
    rows (name uniqueness, get-or-create by name)."""
    return cls.team_id == team_of(session)


def readable_clause(cls: Any, team_id: str) -> ColumnElement[bool]:
    """What team ``team_id`` may read of ``cls``: its own rows and public ones."""
    clause = or_(cls.team_id == team_id, cls.visibility == "public")
    if cls is Model:
        on_public_benchmark = (select(BenchmarkModel.model_id)
                               .join(Benchmark, Benchmark.id == BenchmarkModel.benchmark_id)
                               .where(Benchmark.visibility == "public"))
        clause = or_(clause, Model.id.in_(on_public_benchmark))
    return clause


def require_own(session: Session, resource: TeamOwned, what: str) -> None:
    """403 unless the session's team owns ``resource`` (a public resource of another team is readable only)."""
    if resource.team_id != team_of(session):
        raise Forbidden(f"{what} belongs to another team: it is readable, not writable",
                        [{"detail": "only the owning team may change or delete it"}])


def owned_classes() -> list[type[Any]]:
    """Every mapped class that holds a team's data."""
    found: list[type[Any]] = []
    stack = list(TeamOwned.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if hasattr(cls, "__table__"):
            found.append(cls)
    return found


@event.listens_for(Session, "do_orm_execute")
def _scope_statement(state: ORMExecuteState) -> None:
    caller = caller_of(state.session)
    if caller is None or state.is_column_load or not (state.is_select or state.is_update or state.is_delete):
        return
    team_id = caller.team_id
    if state.is_select:
        options = [with_loader_criteria(cls, readable_clause(cls, team_id), include_aliases=True)
                   for cls in owned_classes()]
    else:
        options = [with_loader_criteria(cls, cls.team_id == team_id, include_aliases=True) for cls in owned_classes()]
    state.statement = state.statement.options(*options)


@event.listens_for(Session, "before_flush")
def _stamp_and_guard(session: Session, _context: Any, _instances: Any) -> None:
    caller = caller_of(session)
    team_id = caller.team_id if caller is not None else None
    for obj in session.new:
        if isinstance(obj, TeamOwned):
            if obj.team_id is None:
                obj.team_id = team_id or LOCAL_TEAM_ID
            elif team_id is not None and obj.team_id != team_id:
                raise Forbidden("a resource can only be created in the caller's own team")
            if obj.visibility is None:
                obj.visibility = "private"
    if team_id is None:
        return
    for obj in session.deleted:
        if isinstance(obj, TeamOwned) and obj.team_id != team_id:
            raise Forbidden("this resource belongs to another team: it is readable, not deletable")
    for obj in session.dirty:
        if isinstance(obj, TeamOwned) and obj.team_id != team_id and session.is_modified(obj):
            raise Forbidden("this resource belongs to another team: it is readable, not writable")


__all__ = ["CALLER_KEY", "bind_caller", "caller_of", "job_caller", "owned_by_caller", "owned_classes",
           "readable_clause", "require_own", "scoped_factory", "team_of", "team_scoped_factory", "unscoped"]
