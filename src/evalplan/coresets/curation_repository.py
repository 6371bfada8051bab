"""The queries of curated coresets (``evalplan.coresets.curation``): a series' versions, the rows its
provenance hashes, the frozen state, the ranked item keys.

Apart from ``evalplan.coresets.repository`` because that module builds on curation (a pending coreset is the
next version of its series, a selection records the data's provenance): curation imports these queries, the
repository imports curation, and no module imports back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, select, text
from sqlalchemy.orm import Session

from evalplan.auth.scoping import owned_by_caller
from evalplan.db.models import Benchmark, Coreset, CoresetItem, Item, Model, Score, Team

#: the ``scores`` view's rows of one benchmark with model name and item id, score row first (SQLite)
SQLITE_SCORE_LINES = (
    "SELECT m.name, i.item_id, r.metric, j.value FROM score_rows r CROSS JOIN json_each(r.vals) j "
    "CROSS JOIN items i CROSS JOIN models m WHERE r.benchmark_id = :b AND j.type IN ('real', 'integer') "
    "AND i.benchmark_id = r.benchmark_id AND i.position = j.key AND m.id = r.model_id "
    "ORDER BY m.name, i.item_id, r.metric")


def series_version(session: Session, name: str, version: str, *where: Any) -> Coreset | None:
    """Version ``version`` (digits, or ``"latest"``: the highest) of the readable series ``name``, narrowed by
    ``where`` (e.g. a team)."""
    stmt = select(Coreset).where(Coreset.name == name).where(*where)
    if version == "latest":
        stmt = stmt.order_by(Coreset.version.desc())
    else:
        stmt = stmt.where(Coreset.version == int(version))
    return session.scalars(stmt.limit(1)).first()


def series_teams(session: Session, name: str) -> set[str]:
    """Ids of the teams with a readable series ``name``."""
    return set(session.scalars(select(Coreset.team_id).where(Coreset.name == name).distinct()))


def team_names(session: Session, ids: Iterable[str]) -> dict[str, str]:
    """Team id -> name."""
    return dict(session.execute(select(Team.id, Team.name).where(Team.id.in_(ids))).all())


def lock_coreset(session: Session, coreset_id: str) -> Coreset | None:
    """The coreset, row-locked (``FOR UPDATE``) and refreshed from the database."""
    return session.scalars(select(Coreset).where(Coreset.id == coreset_id).with_for_update()
                           .execution_options(populate_existing=True)).first()


def latest_version(session: Session, name: str) -> int | None:
    """The highest version of the caller's team's series ``name`` (None: no such series)."""
    return session.scalar(select(func.max(Coreset.version)).where(Coreset.name == name,
                                                                  owned_by_caller(session, Coreset)))


def write_first_on_sqlite(session: Session) -> None:
    """On SQLite, make the transaction's first statement a write, so its write lock is taken before any
    read pins a snapshot (a deferred transaction that read first cannot write after another commit):
    concurrent creates of one series then serialize on the lock instead of failing."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(text("UPDATE coresets SET version = version WHERE 1 = 0"))


def item_lines(session: Session, benchmark_id: str) -> Iterable[Any]:
    """(item id, content hash) of the benchmark's items, by item id."""
    return session.execute(select(Item.item_id, Item.content_hash).where(Item.benchmark_id == benchmark_id)
                           .order_by(Item.item_id))


def score_lines(session: Session, benchmark_id: str) -> Iterable[Any]:
    """(model name, item id, metric, value) of the benchmark's scores, by model name, item id and metric."""
    if session.get_bind().dialect.name == "sqlite":
        # the same rows in the same order, joined from the score rows outwards (CROSS JOIN fixes SQLite's join
        # order): through the ``scores`` view SQLite scanned every score row once per item (MuSR: minutes, inside
        # the selection job's write transaction, while every other writer waited; issue 34)
        return session.execute(text(SQLITE_SCORE_LINES), {"b": benchmark_id})
    return session.execute(
        select(Model.name, Item.item_id, Score.metric, Score.value)
        .join(Item, Item.pk == Score.item_pk).join(Model, Model.id == Score.model_id)
        .where(Item.benchmark_id == benchmark_id).order_by(Model.name, Item.item_id, Score.metric)
        .execution_options(yield_per=10_000))


def benchmarks_in(session: Session, ids: list[str]) -> list[Benchmark]:
    """The readable benchmarks among ``ids``."""
    return list(session.scalars(select(Benchmark).where(Benchmark.id.in_(ids))))


def benchmark_ids_in(session: Session, ids: list[str]) -> set[str]:
    """The ids of the readable benchmarks among ``ids``."""
    return set(session.scalars(select(Benchmark.id).where(Benchmark.id.in_(ids))))


def fitted_state(session: Session, coreset_id: str) -> dict[str, Any] | None:
    """The coreset's stored ``fitted_state`` (a deferred column, read on its own)."""
    return session.scalar(select(Coreset.fitted_state).where(Coreset.id == coreset_id))


def delete_items(session: Session, coreset_id: str) -> None:
    """Delete the coreset's ranked items."""
    session.execute(delete(CoresetItem).where(CoresetItem.coreset_id == coreset_id))


def ranked_item_keys(session: Session, coreset_id: str) -> list[tuple[str, str]]:
    """(benchmark name, item id) of the coreset's items, in rank order."""
    return [(b, i) for b, i in session.execute(
        select(Benchmark.name, Item.item_id).select_from(CoresetItem).join(Item, Item.pk == CoresetItem.item_pk)
        .join(Benchmark, Benchmark.id == CoresetItem.benchmark_id)
        .where(CoresetItem.coreset_id == coreset_id).order_by(CoresetItem.rank)).all()]
