"""``POST /v1/coresets/{id}/predict``: gather the target's coreset scores, then its family predicts."""

from __future__ import annotations

from threading import Lock
from typing import Any

from cachetools import LRUCache
from sqlalchemy.orm import Session

from evalplan.benchmarks.repository import benchmark_map
from evalplan.benchmarks.service import scale_of
from evalplan.coresets.curation import published_reads
from evalplan.coresets.families.base import TargetScores
from evalplan.coresets.registry import family_of
from evalplan.coresets.repository import coreset_item_cells, coreset_item_ids
from evalplan.coresets.service import require_ready
from evalplan.db.models import Benchmark, Coreset, Model
from evalplan.kit.errors import ErrorCollector, InvalidInput, NotFound
from evalplan.models.repository import models_named
from evalplan.models.service import get_model

Cells = dict[tuple[str, str], tuple[str, int]]


def predict(session: Session, coreset: Coreset, *, model: str | None, scores: list[dict[str, Any]] | None,
            level: float | None) -> dict[str, Any]:
    """Full-benchmark estimates from posted ``scores`` or the stored scores of ``model``."""
    require_ready(coreset)
    cells, benchmarks = _coreset_cells(session, coreset)
    # with posted scores `model` only labels the prediction, as sent: a CI job's new checkpoint need not be
    # registered, and nothing is stored (issue 32 item 7; docs/API_NOTES.md); without them it names the model
    # whose stored scores are used (the caller's own first: evalplan.auth.naming)
    target = get_model(session, model) if model is not None and scores is None else None
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


def predict_models(session: Session, coreset: Coreset, models: list[str], level: float | None) -> dict[str, Any]:
    """One prediction per listed model from its stored scores, in request order. The family's
    ``predict_many`` (score-based: predictors fitted once, applied to all targets at once) when it
    has one, else its ``predict`` per model. 404 for an unknown model, 422 for a model named twice or
    one without stored scores on the coreset's items."""
    require_ready(coreset)
    cells, benchmarks = _coreset_cells(session, coreset)
    by_ref = models_named(session, models)  # one rule with {"model": ...}
    errors = ErrorCollector()
    targets: list[Model] = []
    for i, ref in enumerate(models):
        found = by_ref.get(ref)
        if found is None:
            raise NotFound(f"model {ref!r} does not exist",
                           [{"field": f"models[{i}]", "detail": f"no model with id or name {ref!r}"}])
        targets.append(found)
    seen: set[str] = set()
    for i, m in enumerate(targets):
        if m.id in seen:
            errors.add(f"model {m.name!r} is listed twice", field=f"models[{i}]")
        seen.add(m.id)
    errors.raise_if_any("invalid models")
    values = _models_values(session, targets, coreset, benchmarks)
    for i, m in enumerate(targets):
        if not values.get(m.id):
            errors.add(f"model {m.name!r} has no stored scores on this coreset's items", field=f"models[{i}]")
    errors.raise_if_any("models without stored scores")
    family = family_of(coreset.method)
    lvl = family.default_level if level is None else float(level)
    benchmark_of = {pk: b for (ref, _), (b, pk) in cells.items() if ref == b}
    scores = [TargetScores(m.name, values[m.id], benchmark_of, benchmarks) for m in targets]
    many = getattr(family, "predict_many", None)
    if many is not None:
        predictions = many(session, coreset, scores, lvl)
    else:
        predictions = [family.predict(session, coreset, s, lvl) for s in scores]
    return {"coreset": coreset.id, "level": lvl, "predictions": predictions}


def _models_values(session: Session, models: list[Model], coreset: Coreset,
                   benchmarks: dict[str, Benchmark]) -> dict[str, dict[int, float]]:
    """Each model's stored scores (its benchmark's default metric) on the coreset's items: one query."""
    metric_of = {bid: b.default_metric for bid, b in benchmarks.items()}
    rows = coreset_item_cells(session, coreset.id, [m.id for m in models])
    out: dict[str, dict[int, float]] = {m.id: {} for m in models}
    for model_id, pk, value, metric, bid in rows:
        if metric == metric_of.get(bid):
            out[model_id][int(pk)] = float(value)
    return out


_CELLS_SIZE = 64
_CELLS: LRUCache[tuple[str, Any], Cells] = LRUCache(maxsize=_CELLS_SIZE)
_CELLS_LOCK = Lock()


def _coreset_cells(session: Session, coreset: Coreset) -> tuple[Cells, dict[str, Benchmark]]:
    """(benchmark ref, item id) -> (benchmark id, item pk); refs are both names and ids. The cells of
    a ready coreset are cached by (id, updated_at, benchmark names): its items never change without
    its row changing."""
    with published_reads(session, coreset):  # a published version's items are shared (curation.published_reads)
        ids = coreset.benchmark_ids
        benchmarks = benchmark_map(session, ids)
        return _cells_of(session, coreset, benchmarks)


def _cells_of(session: Session, coreset: Coreset,
              benchmarks: dict[str, Benchmark]) -> tuple[Cells, dict[str, Benchmark]]:
    key = (coreset.id, (coreset.updated_at, tuple(sorted((b.id, b.name) for b in benchmarks.values()))))
    with _CELLS_LOCK:
        if key in _CELLS and coreset.status == "ready":
            return _CELLS[key], benchmarks  # a hit is the most recently used
    cells: Cells = {}
    rows = coreset_item_ids(session, coreset.id)
    for benchmark_id, item_pk, item_id in rows:
        if benchmark_id not in benchmarks:  # a public, unpublished coreset on a benchmark the caller cannot read
            continue
        for ref in (benchmark_id, benchmarks[benchmark_id].name):
            cells[(ref, item_id)] = (benchmark_id, item_pk)
    if coreset.status == "ready":
        with _CELLS_LOCK:
            _CELLS[key] = cells  # the least recently used leaves beyond _CELLS_SIZE
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
    """The model's stored scores on the coreset's items (each benchmark's default metric): one query."""
    return _models_values(session, [model], coreset, benchmarks)[model.id]
