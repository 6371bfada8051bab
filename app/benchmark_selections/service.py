"""Benchmark-level selection (``POST /v1/benchmark-selections``, paper 000 §4.4).

The input is a models x benchmarks summary matrix, either uploaded (``matrix``) or computed from
stored item scores (``benchmarks``: each model's mean score over the benchmark's scored items, for
the metric asked for or each benchmark's default metric; only models with a score on at least one of
the benchmarks; a model without scores on a benchmark is NaN there). The science is
``app.core.benchmark_selection``: ``BenchmarkSelector`` standardizes every column with the training
mean/std and selects on the correlation matrix Σ̂; eq. 8 imputes the unselected benchmarks.

With ``test_fraction > 0`` the models are split once with ``numpy.random.default_rng(seed)``
(``round(test_fraction * n)`` test models, at least 1); the selection and the stored imputation
model are fitted on the training models only and the test R² (eq. 9, standardized space, over the
unselected benchmarks, test models complete on the selected benchmarks) is reported. Without a split
everything is fitted on all models and only the residual variance fraction (eqs. 10-11) is reported.

Selection is a fast O(k B³) computation, so it runs in the request (no job).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.benchmark_selection import METHODS, BenchmarkSelector, GaussianImputer, test_r2
from app.db.models import BenchmarkSelection, Model
from app.kit.errors import ErrorCollector, InvalidInput, NotFound
from app.benchmark_selections.schemas import BenchmarkSelectionCreate
from app.benchmarks.service import get_benchmark
from app.models.service import get_model
from app.benchmarks.score_matrix import load_matrix
from app.benchmarks.scores import check_metric

MIN_MODELS = 3


@dataclass
class SummaryMatrix:
    models: list[str]
    benchmarks: list[str]
    values: np.ndarray  # models x benchmarks, NaN = missing
    source: str
    metric: str | None


# --------------------------------------------------------------------------- input


def _number(value: Any) -> float | None:
    """A finite float, NaN for null, or None when the cell is not a finite number."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def _check_names(names: list[str], field: str, errors: ErrorCollector) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if not name or not name.strip():
            errors.add("empty name", field=f"{field}.{i}")
        elif name in seen:
            errors.add(f"{name!r} is named twice", field=f"{field}.{i}")
        seen.add(name)


def matrix_from_upload(matrix: Any) -> SummaryMatrix:
    errors = ErrorCollector()
    _check_names(matrix.models, "matrix.models", errors)
    _check_names(matrix.benchmarks, "matrix.benchmarks", errors)
    n, b = len(matrix.models), len(matrix.benchmarks)
    if len(matrix.values) != n:
        errors.add(f"values has {len(matrix.values)} rows for {n} models", field="matrix.values")
    values = np.full((len(matrix.values), b), np.nan)
    for i, row in enumerate(matrix.values):
        if len(row) != b:
            errors.add(f"row has {len(row)} values for {b} benchmarks", field=f"matrix.values.{i}")
            continue
        for j, cell in enumerate(row):
            x = _number(cell)
            if x is None:
                errors.add(f"not a finite number or null: {cell!r}", field=f"matrix.values.{i}.{j}")
            else:
                values[i, j] = x
    errors.raise_if_any("invalid matrix")
    return SummaryMatrix(list(matrix.models), list(matrix.benchmarks), values, "matrix", None)


def matrix_from_scores(session: Session, refs: list[str], metric: str | None,
                       model_refs: list[str] | None) -> SummaryMatrix:
    """Each model's mean item score per benchmark (NaN where it has none)."""
    if metric is not None:
        check_metric(metric)
    benchmarks = [get_benchmark(session, ref) for ref in refs]
    ids = [bm.id for bm in benchmarks]
    if len(set(ids)) != len(ids):
        raise InvalidInput("a benchmark is named twice", [{"field": "benchmarks", "detail": "duplicates"}])
    wanted: list[Model] | None = None
    if model_refs is not None:
        wanted = [get_model(session, ref) for ref in model_refs]
        if len({m.id for m in wanted}) != len(wanted):
            raise InvalidInput("a model is named twice", [{"field": "models", "detail": "duplicates"}])
    means: dict[str, dict[int, float]] = {}  # model id -> {column: mean}
    names: dict[str, str] = {}
    for j, bm in enumerate(benchmarks):
        sm = load_matrix(session, bm, metric or bm.default_metric)
        for i, (mid, name) in enumerate(zip(sm.model_ids, sm.model_names)):
            row = sm.values[i]
            observed = row[~np.isnan(row)]
            if observed.size:
                means.setdefault(mid, {})[j] = float(observed.mean())
                names[mid] = name
    order = [m.id for m in wanted if m.id in means] if wanted is not None else list(means)
    values = np.full((len(order), len(benchmarks)), np.nan)
    for i, mid in enumerate(order):
        for j, v in means[mid].items():
            values[i, j] = v
    metric_label = metric if metric is not None else (
        benchmarks[0].default_metric if len({bm.default_metric for bm in benchmarks}) == 1 else None)
    return SummaryMatrix([names[m] for m in order], [bm.name for bm in benchmarks], values, "benchmarks", metric_label)


def summary_matrix(session: Session, body: BenchmarkSelectionCreate) -> SummaryMatrix:
    if (body.matrix is None) == (body.benchmarks is None):
        raise InvalidInput("give exactly one of `matrix` and `benchmarks`",
                           [{"field": "matrix", "detail": "exactly one of matrix, benchmarks"},
                            {"field": "benchmarks", "detail": "exactly one of matrix, benchmarks"}])
    if body.matrix is not None:
        extra = [f for f in ("metric", "models") if getattr(body, f) is not None]
        if extra:
            raise InvalidInput(f"{' and '.join(extra)}: only allowed with `benchmarks` input, not `matrix`",
                               [{"field": f, "detail": "only with benchmarks"} for f in extra])
        return matrix_from_upload(body.matrix)
    return matrix_from_scores(session, body.benchmarks or [], body.metric, body.models)


# --------------------------------------------------------------------------- create


def _split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if test_fraction <= 0:
        return np.arange(n), np.arange(0)
    n_test = max(1, int(round(test_fraction * n)))
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def create_selection(session: Session, body: BenchmarkSelectionCreate) -> BenchmarkSelection:
    """Validate, select, evaluate and store (nothing is stored on any error)."""
    if body.method not in METHODS:
        raise InvalidInput(f"unknown method {body.method!r}; valid methods: {', '.join(METHODS)}",
                           [{"field": "method", "detail": f"one of {list(METHODS)}"}])
    data = summary_matrix(session, body)
    n, b = data.values.shape
    if b < 2:
        raise InvalidInput(f"need at least 2 benchmarks, got {b}", [{"field": "benchmarks", "detail": "at least 2"}])
    if not 1 <= body.k < b:
        raise InvalidInput(f"k must be in [1, {b - 1}] for {b} benchmarks, got {body.k}",
                           [{"field": "k", "detail": f"1 <= k < {b}"}])
    train, test = _split(n, body.test_fraction, body.seed)
    if len(train) < MIN_MODELS:
        where = " training" if len(test) else ""
        raise InvalidInput(f"need at least {MIN_MODELS}{where} models with scores, got {len(train)}",
                           [{"field": "matrix" if data.source == "matrix" else "benchmarks",
                             "detail": f"{n} models, {len(train)} for training"}])
    S_train = data.values[train]
    empty = np.flatnonzero(np.isnan(S_train).all(axis=0))
    if empty.size:
        raise InvalidInput("every benchmark needs at least one training score",
                           [{"field": "benchmarks", "benchmark": data.benchmarks[j], "detail": "no training score"}
                            for j in empty])
    selector = BenchmarkSelector(body.k, method=body.method, seed=body.seed, ridge=body.ridge).fit(S_train)
    ranking = selector.ranking_
    diagnostics: dict[str, Any] = {
        "residual_variance": selector.residual_variance_fraction(),
        "residual_variance_by_k": [selector.residual_variance_fraction(j) for j in range(1, body.k + 1)],
        "test_r2": None,
        "ridge_abs": selector.ridge_,
        "n_train": int(len(train)),
        "n_test": int(len(test)),
    }
    if len(test):
        S_test = data.values[test]
        complete = ~np.isnan(S_test[:, ranking]).any(axis=1)
        diagnostics["test_models"] = [data.models[i] for i in test]
        diagnostics["n_test_used"] = int(complete.sum())
        if complete.any():
            S_eval = S_test[complete]
            pred = selector.predict(S_eval[:, ranking])
            diagnostics["test_r2"] = _finite(test_r2(S_eval, pred, selector.mean_, ranking, selector.scale_))
    selection = BenchmarkSelection(
        method=body.method, k=body.k, seed=body.seed, source=data.source, metric=data.metric,
        benchmark_names=data.benchmarks, selected=[data.benchmarks[j] for j in ranking],
        gains=[_finite(g) for g in selector.gains_], mean=selector.mean_.tolist(), scale=selector.scale_.tolist(),
        cov=selector.cov_.tolist(), ridge=float(body.ridge), n_models=int(len(train)),
        test_fraction=float(body.test_fraction), diagnostics=diagnostics,
    )
    session.add(selection)
    session.flush()
    return selection


# --------------------------------------------------------------------------- read / predict


def get_selection(session: Session, selection_id: str) -> BenchmarkSelection:
    selection = session.get(BenchmarkSelection, selection_id)
    if selection is None:
        raise NotFound(f"benchmark selection {selection_id!r} does not exist",
                       [{"parameter": "id", "detail": "no such benchmark selection"}])
    return selection


def _iso(when: datetime | None) -> str | None:
    """ISO 8601 in UTC (SQLite returns naive datetimes for the UTC values written)."""
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).isoformat()


def selection_view(selection: BenchmarkSelection) -> dict[str, Any]:
    diagnostics = dict(selection.diagnostics or {})
    return {
        "id": selection.id, "method": selection.method, "k": selection.k, "seed": selection.seed,
        "source": selection.source, "metric": selection.metric, "benchmarks": selection.benchmark_names,
        "selected": [{"benchmark": name, "rank": r, "gain": gain}
                     for r, (name, gain) in enumerate(zip(selection.selected, selection.gains))],
        "residual_variance": diagnostics.get("residual_variance"),
        "test_r2": diagnostics.get("test_r2"),
        "test_fraction": selection.test_fraction,
        "n_models": selection.n_models,
        "imputation": {"space": "standardized", "mean": selection.mean, "scale": selection.scale,
                       "cov": selection.cov, "ridge": selection.ridge},
        "diagnostics": diagnostics,
        "created_at": _iso(selection.created_at),
    }


def predict(selection: BenchmarkSelection, scores: dict[str, Any]) -> dict[str, Any]:
    """Eq. 8 in standardized space with the stored Σ̂, mapped back with the stored mean/scale
    (identical to ``BenchmarkSelector.predict``)."""
    names = selection.benchmark_names
    selected = list(selection.selected)
    errors = ErrorCollector()
    for name in scores:
        if name not in names:
            errors.add(f"unknown benchmark {name!r}; benchmarks: {names}", field=f"scores.{name}")
        elif name not in selected:
            errors.add(f"benchmark {name!r} is not selected; give scores for {selected}", field=f"scores.{name}")
    for name in selected:
        if name not in scores:
            errors.add(f"missing score for selected benchmark {name!r}", field=f"scores.{name}")
        else:
            value = scores[name]
            if value is None or _number(value) is None:
                errors.add(f"not a finite number: {value!r}", field=f"scores.{name}")
    errors.raise_if_any("invalid scores")
    col = {name: j for j, name in enumerate(names)}
    ranking = np.array([col[name] for name in selected], dtype=int)
    mean, scale = np.asarray(selection.mean, dtype=float), np.asarray(selection.scale, dtype=float)
    x = np.array([[float(scores[name]) for name in selected]])
    imputer = GaussianImputer(np.zeros(len(names)), np.asarray(selection.cov, dtype=float), ranking)
    z = (x - mean[ranking]) / scale[ranking]
    out = imputer.predict(z)[0] * scale + mean
    out[ranking] = x[0]
    observed = set(selected)
    return {"id": selection.id, "selected": selected,
            "benchmarks": {name: {"estimate": float(out[j]), "observed": name in observed}
                           for j, name in enumerate(names)}}
