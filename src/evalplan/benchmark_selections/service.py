"""Benchmark-level selection (``POST /v1/benchmark-selections``, paper 000 §4.4).

The input is a models x benchmarks summary matrix, either uploaded (``matrix``) or computed from
stored item scores (``benchmarks``: each model's mean score over the benchmark's scored items, for
the metric asked for or each benchmark's default metric; only models with a score on at least one of
the benchmarks; a model without scores on a benchmark is NaN there). The science is
``evalplan.core.benchmarks.benchmark_selection``: ``BenchmarkSelector`` standardizes every column with the training
mean/std and selects on the correlation matrix Σ̂; eq. 8 imputes the unselected benchmarks.

With ``test_fraction > 0`` the models are split once with ``numpy.random.default_rng(seed)``
(``round(test_fraction * n)`` test models, at least 1); the selection and the stored imputation
model are fitted on the training models only and the test R² (eq. 9, standardized space, over the
unselected benchmarks, test models complete on the selected benchmarks) is reported. Without a split
everything is fitted on all models and only the residual variance fraction (eqs. 10-11) is reported.

Selection is a fast O(k B³) computation, so it runs in the request (no job).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from evalplan.benchmark_selections import repository as _repository  # noqa: F401  (registers its part of team deletion)
from evalplan.benchmark_selections.schemas import BenchmarkSelectionCreate
from evalplan.benchmark_selections.summary_matrix import number_or_nan, summary_matrix
from evalplan.core.benchmarks.benchmark_selection import METHODS, BenchmarkSelector, GaussianImputer, test_r2
from evalplan.db.models import BenchmarkSelection
from evalplan.kit.errors import ErrorCollector, InvalidInput, NotFound
from evalplan.kit.validation import finite_or_none

MIN_MODELS = 3


# --------------------------------------------------------------------------- create


def _split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if test_fraction <= 0:
        return np.arange(n), np.arange(0)
    n_test = max(1, int(round(test_fraction * n)))
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


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
            diagnostics["test_r2"] = finite_or_none(test_r2(S_eval, pred, selector.mean_, ranking, selector.scale_))
    selection = BenchmarkSelection(
        method=body.method, k=body.k, seed=body.seed, source=data.source, metric=data.metric,
        benchmark_names=data.benchmarks, selected=[data.benchmarks[j] for j in ranking],
        gains=[finite_or_none(g) for g in selector.gains_], mean=selector.mean_.tolist(),
        scale=selector.scale_.tolist(),
        cov=selector.cov_.tolist(), ridge=float(body.ridge), n_models=int(len(train)),
        test_fraction=float(body.test_fraction), diagnostics=diagnostics, visibility=body.visibility,
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


def selection_view(selection: BenchmarkSelection, team: str | None = None) -> dict[str, Any]:
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
        "created_at": selection.created_at, "team": team, "visibility": selection.visibility,
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
            if value is None or number_or_nan(value) is None:
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
