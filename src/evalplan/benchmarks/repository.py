"""The benchmark tables' queries that other domains call (docs/ARCHITECTURE.md "Table ownership"): a benchmark
by id, its item count and largest position, which benchmarks a model has scores on."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evalplan.auth.dependents import register_reader
from evalplan.db.models import Benchmark, BenchmarkModel, Item


def benchmark_by_id(session: Session, benchmark_id: str) -> Benchmark | None:
    """The readable benchmark ``benchmark_id`` (None when missing or another team's private one)."""
    return session.get(Benchmark, benchmark_id)


def benchmark_one(session: Session, benchmark_id: str) -> Benchmark:
    """The readable benchmark ``benchmark_id`` (``NoResultFound`` otherwise)."""
    return session.get_one(Benchmark, benchmark_id)


def ids_by_name(session: Session, benchmark_ids: list[str]) -> dict[str, str]:
    """name -> id of the readable benchmarks among ``benchmark_ids``."""
    return dict(session.execute(select(Benchmark.name, Benchmark.id).where(Benchmark.id.in_(benchmark_ids))).all())


def item_count(session: Session, benchmark_id: str) -> int:
    return int(session.scalar(select(func.count()).select_from(Item).where(Item.benchmark_id == benchmark_id)) or 0)


def item_shape(session: Session, benchmark_id: str) -> tuple[int, int]:
    """(item count, largest item position; -1 without items) of the benchmark."""
    count, last = session.execute(select(func.count(), func.max(Item.position))
                                  .where(Item.benchmark_id == benchmark_id)).one()
    return int(count or 0), -1 if last is None else int(last)


def scored_benchmark_ids(session: Session, model_id: str) -> set[str]:
    """The benchmarks the model has scores on."""
    return set(session.scalars(select(BenchmarkModel.benchmark_id).where(BenchmarkModel.model_id == model_id)))


def pks_of_item_ids(session: Session, benchmark_id: str, item_ids: list[str]) -> list[tuple[str, int]]:
    """``(item id, pk)`` of those of ``item_ids`` the benchmark has."""
    return [(item_id, pk) for item_id, pk in session.execute(
        select(Item.item_id, Item.pk).where(Item.benchmark_id == benchmark_id, Item.item_id.in_(item_ids)))]


register_reader("scored_benchmarks", scored_benchmark_ids)  # evalplan.auth.dependents
