"""The benchmark tables' queries that other domains call (docs/ARCHITECTURE.md "Table ownership"): a benchmark
by id, its item count and largest position, which benchmarks a model has scores on."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

from sqlalchemy import Row, delete, func, select
from sqlalchemy.orm import Session

from evalplan.auth.dependents import register_reader
from evalplan.db.models import Benchmark, BenchmarkModel, Item, Model, ModelResponse, Score, ScoreRow
from evalplan.kit.pagination import Page, keyset_page
from evalplan.models.service import on_model_deleted


def benchmark_by_id(session: Session, benchmark_id: str) -> Benchmark | None:
    """The readable benchmark ``benchmark_id`` (None when missing or another team's private one)."""
    return session.get(Benchmark, benchmark_id)


def benchmark_one(session: Session, benchmark_id: str) -> Benchmark:
    """The readable benchmark ``benchmark_id`` (``NoResultFound`` otherwise)."""
    return session.get_one(Benchmark, benchmark_id)


def benchmark_map(session: Session, benchmark_ids: list[str]) -> dict[str, Benchmark]:
    """id -> benchmark of the readable benchmarks among ``benchmark_ids``."""
    return {b.id: b for b in session.scalars(select(Benchmark).where(Benchmark.id.in_(benchmark_ids)))}


def names_by_id(session: Session, benchmark_ids: Collection[str]) -> dict[str, str]:
    """id -> name of the readable benchmarks among ``benchmark_ids``."""
    return {benchmark_id: name for benchmark_id, name in session.execute(
        select(Benchmark.id, Benchmark.name).where(Benchmark.id.in_(benchmark_ids)))}


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


def text_item_counts(session: Session, benchmark_ids: list[str]) -> dict[str, int]:
    """benchmark id -> its items with a prompt (benchmarks without one are left out)."""
    return {benchmark_id: n for benchmark_id, n in session.execute(
        select(Item.benchmark_id, func.count()).where(Item.benchmark_id.in_(benchmark_ids), Item.prompt.is_not(None))
        .group_by(Item.benchmark_id))}


def item_ids_by_pk(session: Session, item_pks: list[int] | tuple[int, ...]) -> dict[int, str]:
    """item pk -> item id of those of ``item_pks`` that exist."""
    return {pk: item_id for pk, item_id in session.execute(select(Item.pk, Item.item_id).where(Item.pk.in_(item_pks)))}


def positions_by_pk(session: Session, item_pks: list[int] | tuple[int, ...]) -> dict[int, int]:
    """item pk -> position of those of ``item_pks`` that exist."""
    return {pk: position for pk, position in session.execute(
        select(Item.pk, Item.position).where(Item.pk.in_(item_pks)))}


def content_hashes(session: Session, benchmark_id: str) -> Iterator[str | None]:
    """The content hash of each of the benchmark's items, in pk order."""
    return iter(session.scalars(select(Item.content_hash).where(Item.benchmark_id == benchmark_id).order_by(Item.pk)))


def prompt_count(session: Session, benchmark_id: str) -> int:
    """How many of the benchmark's items have a prompt."""
    return int(session.scalar(select(func.count(Item.prompt)).where(Item.benchmark_id == benchmark_id)) or 0)


def any_item_pk(session: Session, benchmark_id: str, item_ids: list[str]) -> int | None:
    """The pk of one of ``item_ids`` the benchmark has, or None when it has none of them."""
    return session.scalar(select(Item.pk).where(Item.benchmark_id == benchmark_id, Item.item_id.in_(item_ids))
                          .limit(1))


def has_scores(session: Session, benchmark_id: str) -> bool:
    """Whether the benchmark holds a score (under any metric)."""
    return session.scalar(select(ScoreRow.model_id).where(ScoreRow.benchmark_id == benchmark_id,
                                                          ScoreRow.n_scores > 0).limit(1)) is not None


def cell_count(session: Session, benchmark_id: str, metric: str, model_ids: list[str]) -> int:
    """How many score cells ``model_ids`` have on the benchmark under ``metric``."""
    return int(session.scalar(select(func.coalesce(func.sum(ScoreRow.n_scores), 0))
                              .where(ScoreRow.benchmark_id == benchmark_id, ScoreRow.metric == metric,
                                     ScoreRow.model_id.in_(model_ids))) or 0)


def score_cells_page(session: Session, benchmark_id: str, metric: str, *, limit: int,
                     cursor: str | None) -> Page[Any]:
    """A page of the benchmark's scores under ``metric``: rows (model id, item pk, model name, item id, value),
    keyset-paginated by (model id, item pk)."""
    stmt = (select(Score.model_id, Score.item_pk, Model.name, Item.item_id, Score.value)
            .join(Item, Item.pk == Score.item_pk).join(Model, Model.id == Score.model_id)
            .where(Item.benchmark_id == benchmark_id, Score.metric == metric))
    return keyset_page(session, stmt, (Score.model_id, Score.item_pk), limit=limit, cursor=cursor, what="score",
                       entities=False)


#: the columns a model-response listing returns, with the model's name as ``model``
RESPONSE_COLUMNS = (ModelResponse.model_id, Model.name.label("model"), ModelResponse.item_pk, ModelResponse.response,
                    ModelResponse.truncated, ModelResponse.n_chars, ModelResponse.source, ModelResponse.extra,
                    ModelResponse.created_at, ModelResponse.updated_at)


def item_response_page(session: Session, item_pk: int, *, model_id: str | None, limit: int,
                       cursor: str | None) -> Page[Any]:
    """A page of the stored responses on item ``item_pk`` of the readable models (``model_id``'s only, when
    given), as rows of :data:`RESPONSE_COLUMNS`, by model id."""
    stmt = (select(*RESPONSE_COLUMNS).join(Model, Model.id == ModelResponse.model_id)
            .where(ModelResponse.item_pk == item_pk))
    if model_id is not None:
        stmt = stmt.where(ModelResponse.model_id == model_id)
    return keyset_page(session, stmt, ModelResponse.model_id, limit=limit, cursor=cursor, what="response",
                       entities=False)


def item_responses(session: Session, benchmark_id: str, item_ids: list[str], names: list[str] | None,
                   first_team: str | None) -> Iterator[Row[Any]]:
    """The stored responses on these items of the benchmark of the readable models (named ``names`` when
    given): rows of :data:`RESPONSE_COLUMNS` with ``item_id`` and the model's ``team_id``, by item id and
    model name, team ``first_team``'s model first among models of one name."""
    stmt = (select(*RESPONSE_COLUMNS, Item.item_id, Model.team_id).join(Model, Model.id == ModelResponse.model_id)
            .join(Item, Item.pk == ModelResponse.item_pk)
            .where(Item.benchmark_id == benchmark_id, Item.item_id.in_(item_ids)))
    if names is not None:
        stmt = stmt.where(Model.name.in_(names))
    return iter(session.execute(stmt.order_by(Item.item_id, Model.name, Model.team_id != first_team)))


def team_of_benchmark(session: Session, benchmark_id: str) -> str | None:
    """The team id of the readable benchmark ``benchmark_id``."""
    return session.scalar(select(Benchmark.team_id).where(Benchmark.id == benchmark_id))


def models_with_responses(session: Session, benchmark_ids: list[str]) -> list[tuple[str, str]]:
    """``(model id, name)`` of the readable models with stored responses on any of these benchmarks, by name."""
    if not benchmark_ids:
        return []
    stmt = (select(Model.id, Model.name).where(Model.id.in_(
        select(ModelResponse.model_id).where(ModelResponse.benchmark_id.in_(benchmark_ids)).distinct()))
        .order_by(Model.name, Model.id))
    return [(str(i), str(n)) for i, n in session.execute(stmt).all()]


def drop_model_scores(session: Session, model_id: str) -> None:
    """Delete a deleted model's score rows and responses; the benchmarks it had scores on (locked) get a new
    ``data_version`` (``evalplan.models.service.delete_model``)."""
    benchmark_ids = list(session.scalars(select(BenchmarkModel.benchmark_id)
                                         .where(BenchmarkModel.model_id == model_id)))
    session.execute(delete(ScoreRow).where(ScoreRow.model_id == model_id))
    session.execute(delete(ModelResponse).where(ModelResponse.model_id == model_id))
    for benchmark in session.scalars(select(Benchmark).where(Benchmark.id.in_(benchmark_ids)).with_for_update()):
        benchmark.data_version = (benchmark.data_version or 0) + 1


def scored_benchmark_ids(session: Session, model_id: str) -> set[str]:
    """The benchmarks the model has scores on."""
    return set(session.scalars(select(BenchmarkModel.benchmark_id).where(BenchmarkModel.model_id == model_id)))


def pks_of_item_ids(session: Session, benchmark_id: str, item_ids: list[str]) -> list[tuple[str, int]]:
    """``(item id, pk)`` of those of ``item_ids`` the benchmark has."""
    return [(item_id, pk) for item_id, pk in session.execute(
        select(Item.item_id, Item.pk).where(Item.benchmark_id == benchmark_id, Item.item_id.in_(item_ids)))]


register_reader("scored_benchmarks", scored_benchmark_ids)  # evalplan.auth.dependents
on_model_deleted(drop_model_scores)  # evalplan.models.service.delete_model
