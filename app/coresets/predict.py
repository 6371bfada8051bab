"""``POST /v1/coresets/{id}/predict``: gather the target's coreset scores, then its family predicts."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.benchmarks.service import scale_of
from app.coresets.families.base import TargetScores
from app.coresets.registry import family_of
from app.coresets.service import require_ready
from app.db.models import Benchmark, Coreset, CoresetItem, Item, Model, Score
from app.kit.errors import ErrorCollector, InvalidInput
from app.models.service import get_model

Cells = dict[tuple[str, str], tuple[str, int]]


def predict(session: Session, coreset: Coreset, *, model: str | None, scores: list[dict[str, Any]] | None,
            level: float | None) -> dict[str, Any]:
    """Full-benchmark estimates from posted ``scores`` or the stored scores of ``model``."""
    require_ready(coreset)
    cells, benchmarks = _coreset_cells(session, coreset)
    target = get_model(session, model) if model is not None else None
    if scores is not None:
        values = _posted_scores(scores, cells, benchmarks)
    elif target is not None:
        values = _model_values(session, target, coreset, benchmarks)
        if not values:
            raise InvalidInput(f"model {target.name!r} has no stored scores on this coreset's items",
                               [{"field": "model", "detail": "post `scores` instead"}])
    else:
        raise InvalidInput("send `scores` (the target's coreset results) or a `model` with stored scores",
                           [{"field": "scores", "detail": "required without model"}])
    if not values:
        raise InvalidInput("no scores", [{"field": "scores", "detail": "empty list"}])
    family = family_of(coreset.method)
    benchmark_of = {pk: b for (ref, _), (b, pk) in cells.items() if ref == b}
    target_scores = TargetScores(target.name if target else model, values, benchmark_of, benchmarks)
    return family.predict(session, coreset, target_scores, family.default_level if level is None else float(level))


def _coreset_cells(session: Session, coreset: Coreset) -> tuple[Cells, dict[str, Benchmark]]:
    """(benchmark ref, item id) -> (benchmark id, item pk); refs are both names and ids."""
    benchmarks = {b.id: b for b in session.scalars(select(Benchmark).where(Benchmark.id.in_(coreset.benchmark_ids)))}
    cells: Cells = {}
    rows = session.execute(
        select(CoresetItem.benchmark_id, CoresetItem.item_pk, Item.item_id)
        .join(Item, Item.pk == CoresetItem.item_pk).where(CoresetItem.coreset_id == coreset.id)
    ).all()
    for benchmark_id, item_pk, item_id in rows:
        for ref in (benchmark_id, benchmarks[benchmark_id].name):
            cells[(ref, item_id)] = (benchmark_id, item_pk)
    return cells, benchmarks


def _posted_scores(scores: list[dict[str, Any]], cells: Cells, benchmarks: dict[str, Benchmark]) -> dict[int, float]:
    errors = ErrorCollector()
    values: dict[int, float] = {}
    for row, s in enumerate(scores):
        key = (s["benchmark"], s["item"])
        if key not in cells:
            errors.add(f"item {s['item']!r} of benchmark {s['benchmark']!r} is not in this coreset", row=row,
                       column="item")
            continue
        benchmark_id, item_pk = cells[key]
        reason = scale_of(benchmarks[benchmark_id]).problem(float(s["score"]))
        if reason:
            errors.add(reason, row=row, column="score")
            continue
        if item_pk in values:
            errors.add(f"item {s['item']!r} of benchmark {s['benchmark']!r} appears twice", row=row, column="item")
            continue
        values[item_pk] = float(s["score"])
    errors.raise_if_any("invalid coreset scores")
    return values


def _model_values(session: Session, model: Model, coreset: Coreset, benchmarks: dict[str, Benchmark]) -> dict[int,
                                                                                                              float]:
    values: dict[int, float] = {}
    for benchmark in benchmarks.values():
        rows = session.execute(
            select(Score.item_pk, Score.value)
            .join(CoresetItem, (CoresetItem.item_pk == Score.item_pk) & (CoresetItem.coreset_id == coreset.id))
            .where(Score.model_id == model.id, Score.metric == benchmark.default_metric,
                   CoresetItem.benchmark_id == benchmark.id)
        ).all()
        values.update({int(pk): float(v) for pk, v in rows})
    return values
