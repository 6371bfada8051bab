"""Coreset persistence: the pending coreset with its job, its ranked items, and a selection job's
outcome (the items, diagnostics and fitted state, or the failure).

The outcome helpers are shared by the text, score-based and hidden-state selection jobs. ``diagnostics`` is returned by
``GET /v1/coresets/{id}`` and stays small; what only predict needs (the score-based references'
coreset-score matrices) goes to the deferred ``fitted_state`` column (docs/DECISIONS.md).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, delete, func, insert, select
from sqlalchemy.orm import Session

from evalplan.auth.audit import record
from evalplan.auth.deletion import register_team_part
from evalplan.auth.dependents import register_reader
from evalplan.benchmarks.repository import benchmark_one
from evalplan.benchmarks.service import on_benchmark_deleted
from evalplan.coresets.curation import (
    base_provenance,
    check_name,
    data_provenance,
    insert_next_version,
    published_reads,
)
from evalplan.coresets.families.base import CoresetRequest, SelectionPlan
from evalplan.db.models import (
    Benchmark,
    BenchmarkModel,
    Coreset,
    CoresetItem,
    HiddenState,
    Item,
    Job,
    Model,
    Score,
    TrainedModel,
)
from evalplan.kit.db import begin_write
from evalplan.kit.errors import Conflict
from evalplan.kit.jobs import JobContext, create_job
from evalplan.kit.validation import finite_or_none


def store_pending(session: Session, request: CoresetRequest, benchmarks: list[Benchmark], params: dict[str, Any],
                  plan: SelectionPlan, job_kind: str) -> tuple[Coreset, Job]:
    """Add the pending coreset (the next version of its name) and its queued job; dispatch after commit."""
    check_name(request.name)
    coreset = Coreset(
        name=request.name, version=1, method=request.method, status="pending", visibility=request.visibility,
        benchmark_ids=[b.id for b in benchmarks], budget=request.budget, params=params, seed=request.seed,
        reference_models=plan.reference_models, predictor=plan.predictor, embedding_model=plan.embedding_model,
    )
    coreset.provenance = base_provenance(session, coreset)
    insert_next_version(session, coreset)
    record(session, "create", "coreset", coreset.id, name=coreset.name, version=coreset.version)
    job = create_job(session, job_kind, {"coreset_id": coreset.id, **plan.payload})
    coreset.job_id = job.id
    session.flush()
    return coreset, job


def coreset_rows(session: Session, coreset: Coreset) -> list[dict[str, Any]]:
    """The ranked items: ``{benchmark (name), item, rank, gain, weight, source_index}`` in rank order."""
    with published_reads(session, coreset):  # a published version's items are shared (curation.published_reads)
        rows = session.execute(
            select(CoresetItem.rank, CoresetItem.gain, CoresetItem.weight, Item.item_id, Item.source_index,
                   Benchmark.name)
            .join(Item, Item.pk == CoresetItem.item_pk)
            .join(Benchmark, Benchmark.id == CoresetItem.benchmark_id)
            .where(CoresetItem.coreset_id == coreset.id).order_by(CoresetItem.rank)
        ).all()
    return [{"benchmark": b, "item": i, "rank": r, "gain": finite_or_none(g), "weight": finite_or_none(w),
             "source_index": s} for r, g, w, i, s, b in rows]


def benchmark_names(session: Session, ids: list[str]) -> list[str]:
    names = dict(session.execute(select(Benchmark.id, Benchmark.name).where(Benchmark.id.in_(ids))).all())
    return [names.get(i, i) for i in ids]


def load_for_job(ctx: JobContext, coreset_id: str) -> Coreset:
    """The coreset a selection job works on (detached, its columns loaded); LookupError if it vanished."""
    with ctx.session_factory() as session:
        coreset = session.get(Coreset, coreset_id)
        if coreset is None:
            raise LookupError(f"coreset {coreset_id} vanished")
        return coreset


def save_selection(ctx: JobContext, coreset_id: str, rows: list[dict[str, Any]], diagnostics: dict[str, Any],
                   params: dict[str, Any] | None = None, fitted_state: dict[str, Any] | None = None) -> None:
    """Replace the coreset's items with ``rows`` and mark it ready (``params``: resolved, e.g. tuned alpha;
    ``fitted_state``: what predict refits from, stored apart from ``diagnostics``). The data's provenance (a
    scan of the scores) is read before the write transaction, which only writes."""
    with ctx.session_factory() as session:
        provenance = data_provenance(session, session.get_one(Coreset, coreset_id))
    with ctx.session_factory() as session:
        coreset = begin_write(session).get_one(Coreset, coreset_id, with_for_update=True)
        if coreset.published_at is not None:
            raise Conflict(f"coreset {coreset_id} is published: its items never change",
                           [{"field": "published_at", "detail": "published versions are frozen"}])
        session.execute(delete(CoresetItem).where(CoresetItem.coreset_id == coreset_id))
        if rows:
            session.execute(insert(CoresetItem), rows)
        if params is not None:
            coreset.params = params
        if fitted_state is not None:
            coreset.fitted_state = fitted_state
        coreset.status, coreset.diagnostics, coreset.error = "ready", diagnostics, None
        coreset.provenance = {**(coreset.provenance or {}), "params": coreset.params, **provenance}
        session.commit()


def mark_coreset_failed(ctx: JobContext, coreset_id: str, exc: Exception) -> None:
    """Record why a coreset's job failed on the coreset itself (the job keeps its own error)."""
    with ctx.session_factory() as session:
        coreset = begin_write(session).get(Coreset, coreset_id)
        if coreset is not None:
            coreset.status = "failed"
            coreset.error = {"title": type(exc).__name__, "detail": str(exc)}
            session.commit()


# --------------------------------------------------------------------------- score-based family (families/score_based)


def item_pks(session: Session, benchmark_id: str) -> list[int]:
    """The benchmark's item pks, ascending."""
    return list(session.scalars(select(Item.pk).where(Item.benchmark_id == benchmark_id).order_by(Item.pk)))


def scored_model_names(session: Session, benchmark_id: str) -> set[str]:
    """Names of the (readable) models with scores on the benchmark."""
    return set(session.scalars(select(Model.name).join(BenchmarkModel, BenchmarkModel.model_id == Model.id)
                               .where(BenchmarkModel.benchmark_id == benchmark_id)))


# --------------------------------------------------------------------------- text and hidden-state families


def text_item_counts(session: Session, benchmark_ids: list[str]) -> dict[str, tuple[int, int]]:
    """(items, items with text) per benchmark."""
    rows = session.execute(
        select(Item.benchmark_id, func.count(), func.count(Item.prompt))
        .where(Item.benchmark_id.in_(benchmark_ids)).group_by(Item.benchmark_id)
    ).all()
    found = {b: (int(n), int(t)) for b, n, t in rows}
    return {b: found.get(b, (0, 0)) for b in benchmark_ids}


def item_counts(session: Session, benchmark_ids: list[str]) -> dict[str, int]:
    """Items per benchmark now."""
    found = {b: n for b, n in session.execute(select(Item.benchmark_id, func.count())
                                              .where(Item.benchmark_id.in_(benchmark_ids)).group_by(Item.benchmark_id))}
    return {b: int(found.get(b, 0)) for b in benchmark_ids}


def model_names_scored_on(session: Session, benchmark_ids: list[str]) -> set[str]:
    """Names of the readable models with scores on any of the benchmarks."""
    return set(session.scalars(select(Model.name).join(BenchmarkModel, BenchmarkModel.model_id == Model.id)
                               .where(BenchmarkModel.benchmark_id.in_(benchmark_ids))))


def benchmarks_by_ids(session: Session, benchmark_ids: list[str]) -> list[Benchmark]:
    """The readable benchmarks ``benchmark_ids``, in that order (NoResultFound when one is missing)."""
    return [benchmark_one(session, b) for b in benchmark_ids]


def reference_model_ids(session: Session, references: list[str] | str) -> list[str]:
    """Ids of the readable reference models: named ones, or every one for ``"all"``."""
    stmt = select(Model.id)
    if references != "all":
        stmt = stmt.where(Model.name.in_(list(references)))
    return list(session.scalars(stmt))


def coreset_item_scores(session: Session, coreset_id: str, model_ids: list[str]) -> list[Row[str, str, float]]:
    """``(model_id, benchmark_id, value)`` of the models' scores (their benchmark's default metric) on the
    coreset's items."""
    return list(session.execute(
        select(Score.model_id, CoresetItem.benchmark_id, Score.value)
        .join(CoresetItem, (CoresetItem.item_pk == Score.item_pk) & (CoresetItem.coreset_id == coreset_id))
        .join(Benchmark, Benchmark.id == CoresetItem.benchmark_id)
        .where(Score.model_id.in_(model_ids), Score.metric == Benchmark.default_metric)
    ).all())


def coreset_item_cells(session: Session, coreset_id: str, model_ids: list[str]
                       ) -> list[Row[str, int, float, str, str]]:
    """``(model_id, item_pk, value, metric, benchmark_id)`` of every stored score (any metric) of the models on
    the coreset's items (predict keeps each benchmark's default metric)."""
    return list(session.execute(
        select(Score.model_id, Score.item_pk, Score.value, Score.metric, CoresetItem.benchmark_id)
        .join(CoresetItem, (CoresetItem.item_pk == Score.item_pk) & (CoresetItem.coreset_id == coreset_id))
        .where(Score.model_id.in_(model_ids))
    ).all())


def coreset_item_ids(session: Session, coreset_id: str) -> list[Row[str, int, str]]:
    """``(benchmark_id, item_pk, item_id)`` of the coreset's items."""
    return list(session.execute(
        select(CoresetItem.benchmark_id, CoresetItem.item_pk, Item.item_id)
        .join(Item, Item.pk == CoresetItem.item_pk).where(CoresetItem.coreset_id == coreset_id)
    ).all())


def model_scores_on(session: Session, benchmark: Benchmark, model_ids: list[str]) -> list[Row[str, int, float]]:
    """``(model_id, item_pk, value)`` of the models' scores (the benchmark's default metric) on its items."""
    return list(session.execute(
        select(Score.model_id, Score.item_pk, Score.value)
        .join(Item, Item.pk == Score.item_pk)
        .where(Item.benchmark_id == benchmark.id, Score.model_id.in_(model_ids),
               Score.metric == benchmark.default_metric)
    ).all())


def hidden_states_of(session: Session, benchmark_id: str, model_ids: list[str]) -> list[HiddenState]:
    """The hidden-state rows of the models on the benchmark."""
    return list(session.scalars(select(HiddenState).where(HiddenState.benchmark_id == benchmark_id,
                                                          HiddenState.model_id.in_(model_ids))))


def models_with_hidden_states(session: Session, benchmark_id: str) -> list[Model]:
    """The readable models with hidden states on the benchmark, by name."""
    return list(session.scalars(select(Model).join(HiddenState, HiddenState.model_id == Model.id)
                                .where(HiddenState.benchmark_id == benchmark_id).order_by(Model.name)))


def benchmark_and_models(session: Session, benchmark_id: str, model_ids: list[str]
                         ) -> tuple[Benchmark | None, list[Model | None]]:
    """The readable benchmark and models by id (None for a missing one)."""
    return session.get(Benchmark, benchmark_id), [session.get(Model, m) for m in model_ids]


def models_named(session: Session, names: list[str]) -> list[Model]:
    """The readable models named ``names``."""
    return list(session.scalars(select(Model).where(Model.name.in_(names))))


def trained_model(session: Session, key: str) -> TrainedModel | None:
    """The cached trained model (a RepCore alignment) of ``key``."""
    return session.get(TrainedModel, key)


def store_trained_model(session: Session, **columns: Any) -> None:
    """Add a trained model row (the caller commits; a concurrent identical one raises IntegrityError then)."""
    session.add(TrainedModel(**columns))


# ------------------------------------------------------------------ what other domains read and delete of coresets


def published_coresets(session: Session) -> list[Row[Any]]:
    """``(id, benchmark_ids, reference_models)`` of every readable published coreset (the caller unscopes)."""
    return list(session.execute(select(Coreset.id, Coreset.benchmark_ids, Coreset.reference_models)
                                .where(Coreset.published_at.isnot(None))).all())


def foreign_coreset_ids(session: Session, benchmark: Benchmark) -> list[str]:
    """Ids of the coresets of teams other than the benchmark's built on it (the caller unscopes)."""
    return [c.id for c in session.scalars(select(Coreset).where(Coreset.team_id != benchmark.team_id))
            if benchmark.id in (c.benchmark_ids or [])]


def team_published_ids(session: Session, team_id: str) -> list[str]:
    """Ids of the team's published coresets."""
    return list(session.scalars(select(Coreset.id).where(Coreset.team_id == team_id, Coreset.published_at.isnot(None))))


def readable_ids(session: Session, coreset_ids: list[str]) -> list[str]:
    """Those of ``coreset_ids`` the caller may read."""
    return list(session.scalars(select(Coreset.id).where(Coreset.id.in_(coreset_ids))))


def delete_own_on_benchmark(session: Session, benchmark: Benchmark) -> list[str]:
    """Delete the benchmark's team's coresets built on it (a benchmark's ``DELETE``); their ids."""
    own = [c for c in session.scalars(select(Coreset).where(Coreset.team_id == benchmark.team_id))
           if benchmark.id in (c.benchmark_ids or [])]
    for coreset in own:
        session.execute(delete(CoresetItem).where(CoresetItem.coreset_id == coreset.id))
        session.delete(coreset)
    return [c.id for c in own]


def delete_team_coresets(session: Session, team_id: str) -> list[str]:
    """Delete the team's coresets with their items (team deletion); their ids."""
    coresets = list(session.scalars(select(Coreset.id).where(Coreset.team_id == team_id)))
    if coresets:
        session.execute(delete(CoresetItem).where(CoresetItem.coreset_id.in_(coresets)))
        for coreset in session.scalars(select(Coreset).where(Coreset.id.in_(coresets))):
            session.delete(coreset)
    return coresets


def ready_ids_on(session: Session, benchmark_id: str, limit: int) -> list[str]:
    """The newest ``limit`` readable ready coresets built on the benchmark, newest first."""
    ready = session.execute(select(Coreset.id, Coreset.benchmark_ids).where(Coreset.status == "ready")
                            .order_by(Coreset.created_at.desc(), Coreset.id.desc()))
    return [cid for cid, ids in ready if benchmark_id in (ids or [])][:limit]


def coreset_by_id(session: Session, coreset_id: str) -> Coreset:
    """The readable coreset ``coreset_id`` (NoResultFound otherwise)."""
    return session.get_one(Coreset, coreset_id)


def picked_positions(session: Session, coreset_id: str, benchmark_id: str) -> list[int]:
    """The ``items.position`` of each item the coreset picked from the benchmark."""
    return list(session.scalars(
        select(Item.position).join(CoresetItem, CoresetItem.item_pk == Item.pk)
        .where(CoresetItem.coreset_id == coreset_id, CoresetItem.benchmark_id == benchmark_id)))


register_reader("published_coresets", published_coresets)  # evalplan.auth.dependents
register_reader("foreign_coresets", foreign_coreset_ids)
register_reader("team_published_coresets", team_published_ids)
register_reader("readable_coresets", readable_ids)
register_team_part("coresets", delete_team_coresets)  # evalplan.auth.deletion
on_benchmark_deleted(delete_own_on_benchmark)  # evalplan.benchmarks.service.delete_benchmark
