"""``POST /v1/coresets/{id}/predict``: full-benchmark estimates from a target's coreset scores."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.prediction import estimate_from_coreset
from app.db.models import Benchmark, Coreset, CoresetItem, Item, Model, Score
from app.kit.errors import ErrorCollector, InvalidInput
from app.benchmarks.service import scale_of
from app.coresets.service import require_ready
from app.models.service import get_model


def _coreset_cells(session: Session, coreset: Coreset) -> tuple[dict[tuple[str, str], tuple[str, int]], dict[str, Benchmark]]:
    """(benchmark ref, item id) -> (benchmark id, item pk); refs are both names and ids."""
    benchmarks = {b.id: b for b in session.scalars(select(Benchmark).where(Benchmark.id.in_(coreset.benchmark_ids)))}
    cells: dict[tuple[str, str], tuple[str, int]] = {}
    rows = session.execute(
        select(CoresetItem.benchmark_id, CoresetItem.item_pk, Item.item_id)
        .join(Item, Item.pk == CoresetItem.item_pk).where(CoresetItem.coreset_id == coreset.id)
    ).all()
    for benchmark_id, item_pk, item_id in rows:
        for ref in (benchmark_id, benchmarks[benchmark_id].name):
            cells[(ref, item_id)] = (benchmark_id, item_pk)
    return cells, benchmarks


def _posted_scores(scores: list[dict[str, Any]], cells: dict, benchmarks: dict[str, Benchmark]) -> dict[int, float]:
    errors = ErrorCollector()
    values: dict[int, float] = {}
    for row, s in enumerate(scores):
        key = (s["benchmark"], s["item"])
        if key not in cells:
            errors.add(f"item {s['item']!r} of benchmark {s['benchmark']!r} is not in this coreset", row=row, column="item")
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


def predict(session: Session, coreset: Coreset, *, model: str | None, scores: list[dict[str, Any]] | None,
            level: float | None) -> dict[str, Any]:
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
    from app.coresets.families import score_based as score_coresets

    if score_coresets.is_score_method(coreset.method):
        return score_coresets.predict(session, coreset, values, target.name if target else model, level)
    level = 0.95 if level is None else level
    if coreset.method == "repcore":
        from app.coresets.families import hidden_state as repcore

        return repcore.predict(session, coreset, values, target.name if target else model, level)

    item_benchmark = {pk: b for (ref, _), (b, pk) in cells.items() if ref == b}
    by_benchmark: dict[str, list[float]] = {}
    for pk, value in values.items():
        by_benchmark.setdefault(item_benchmark[pk], []).append(value)
    sizes = dict(session.execute(
        select(Item.benchmark_id, func.count()).where(Item.benchmark_id.in_(list(benchmarks))).group_by(Item.benchmark_id)
    ).all())
    order = list(coreset.benchmark_ids)
    index = {b: i for i, b in enumerate(order)}
    pairs = [(index[b], v) for b, vs in by_benchmark.items() for v in vs]
    result = estimate_from_coreset(
        np.array([v for _, v in pairs]), np.array([i for i, _ in pairs], dtype=np.int64),
        [int(sizes.get(b, 0)) for b in order],
        [benchmarks[b].capability or benchmarks[b].name for b in order],
        level=level,
        score_range=[_range(benchmarks[b]) for b in order],
        binary=[benchmarks[b].score_kind == "binary" for b in order],
        benchmark_names=[benchmarks[b].name for b in order],
    )
    result.pop("level", None)
    result = _json_safe(result)
    extrapolation = _outside_references(session, coreset, by_benchmark, item_benchmark)
    return {"coreset": coreset.id, "model": target.name if target else model, "level": level, **result,
            "extrapolation": extrapolation}


def _range(benchmark: Benchmark) -> tuple[float | None, float | None]:
    if benchmark.score_kind == "binary":
        return 0.0, 1.0
    return benchmark.score_min, benchmark.score_max


def _model_values(session: Session, model: Model, coreset: Coreset, benchmarks: dict[str, Benchmark]) -> dict[int, float]:
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


def _outside_references(session: Session, coreset: Coreset, by_benchmark: dict[str, list[float]],
                        item_benchmark: dict[int, str]) -> bool:
    """True when, on some benchmark, the target's coreset mean lies below the lowest or above the
    highest coreset mean of the reference models (the rule of docs/DECISIONS.md)."""
    if not coreset.reference_models:
        return False
    stmt = select(Model.id)
    if coreset.reference_models != "all":
        stmt = stmt.where(Model.name.in_(list(coreset.reference_models)))
    model_ids = list(session.scalars(stmt))
    rows = session.execute(
        select(Score.model_id, Score.item_pk, Score.value)
        .join(CoresetItem, (CoresetItem.item_pk == Score.item_pk) & (CoresetItem.coreset_id == coreset.id))
        .join(Benchmark, Benchmark.id == CoresetItem.benchmark_id)
        .where(Score.model_id.in_(model_ids), Score.metric == Benchmark.default_metric)
    ).all()
    sums: dict[tuple[str, str], list[float]] = {}
    for model_id, pk, value in rows:
        sums.setdefault((model_id, item_benchmark[int(pk)]), []).append(float(value))
    for benchmark_id, target_values in by_benchmark.items():
        means = [np.mean(v) for (m, b), v in sums.items() if b == benchmark_id]
        if means and not (min(means) - 1e-12 <= np.mean(target_values) <= max(means) + 1e-12):
            return True
    return False


def _json_safe(value: Any) -> Any:
    """Infinite or NaN numbers (e.g. the interval of an unbounded score scale) become null."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value
