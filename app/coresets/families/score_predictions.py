"""Predictions of score-based coresets (papers/002 §2.3, App. L.1): the stored predictor per
benchmark, guarded against extrapolation, with intervals calibrated on the references.

``fitted_state["fits"][benchmark_id]`` (written by the selection job, ``score_based``) holds the
references' coreset scores ``X_ref``, full scores ``y_ref``, weights, lambda, the IRT parameters and
the cross-fitted ``calibration`` errors, so predict refits deterministically without the matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.intervals import (
    extrapolation_flag,
    guarded_predictor,
    interval_from_errors,
    loo_conformal_interval,
    pooled_errors,
)
from app.core.irt import IRTPredictor, item_curve
from app.core.predictors import PREDICTOR_CLASSES, MeanPredictor, WeightedMeanPredictor
from app.db.models import Benchmark, Coreset, Item
from app.kit.errors import ErrorCollector
from app.kit.validation import finite_or_none

PREDICTORS = ("mean", "weighted_mean", "ridge", "kernel_ridge", "aipw", "irt")
DEFAULT_PREDICTOR = "kernel_ridge"


class _IRTAdapter:
    """gp-IRT with the coreset's stored 2PL item parameters; ``fit`` keeps them fixed (so its LOO
    residuals are in-sample with respect to the 2PL fit, see docs/DECISIONS.md)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def fit(self, X: np.ndarray, y: np.ndarray) -> _IRTAdapter:
        s = self.spec
        a, b, theta = np.asarray(s["a"]), np.asarray(s["b"]), np.asarray(s["theta"])
        theta = theta.reshape(-1, a.reshape(len(b), -1).shape[1])
        expected = item_curve(theta, a.reshape(len(b), -1), b)  # the 2PL's expected reference scores
        self.model_ = IRTPredictor(dim=s["dim"], l2=s["l2"], lam=s["lam"]).fit(
            expected, s["selected"], weights=s.get("weights"), item_params=(a, b, theta))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.model_.predict(np.clip(np.asarray(X, dtype=float), 0.0, 1.0)).gp_irt)


def predictor_factory(name: str, fit: dict[str, Any]) -> Any:
    """A zero-argument factory of predictor ``name`` for one benchmark's stored ``fit``."""
    if name == "weighted_mean":
        w = fit.get("weights")
        return (lambda: WeightedMeanPredictor(w)) if w is not None else MeanPredictor
    if name == "irt":
        return lambda: _IRTAdapter({**fit["irt"], "weights": fit.get("weights")})
    if name in PREDICTOR_CLASSES:
        return PREDICTOR_CLASSES[name]
    raise ValueError(f"unknown predictor {name!r}")


def _scale(benchmark: Benchmark) -> tuple[float, float]:
    if benchmark.score_kind == "binary":
        return 0.0, 1.0
    lo = benchmark.score_min if benchmark.score_min is not None else -np.inf
    hi = benchmark.score_max if benchmark.score_max is not None else np.inf
    return float(lo), float(hi)


def _clip(v: float, lo: float, hi: float) -> float:
    return float(min(max(v, lo), hi))


def load_fits(session: Session, coreset: Coreset) -> dict[str, Any]:
    """The stored fits, read explicitly from the deferred ``fitted_state`` column (a coreset written
    before it existed kept them in ``diagnostics["fits"]``; migration 0006 moves them)."""
    state = session.scalar(select(Coreset.fitted_state).where(Coreset.id == coreset.id))
    if state and state.get("fits"):
        return state["fits"]
    return (coreset.diagnostics or {}).get("fits") or {}


def predict(session: Session, coreset: Coreset, values: dict[int, float], model_name: str | None,
            level: float) -> dict[str, Any]:
    """Per benchmark the stored predictor (the extrapolation guard's AIPW for a target outside the
    references' coreset means, unless the caller chose the predictor) with a split-conformal interval
    on the stored cross-fitted errors; capabilities and overall on the pooled per-reference errors."""
    diagnostics = coreset.diagnostics or {}
    fits = load_fits(session, coreset)
    stored = diagnostics.get("predictor") or coreset.predictor or DEFAULT_PREDICTOR
    explicit = bool(diagnostics.get("predictor_explicit"))
    benchmarks = {b.id: b for b in session.scalars(select(Benchmark).where(Benchmark.id.in_(coreset.benchmark_ids)))}
    all_pks = [pk for fit in fits.values() for pk in fit["items"]]
    item_ids = dict(session.execute(select(Item.pk, Item.item_id).where(Item.pk.in_(all_pks))).all())
    errors = ErrorCollector()
    for bid in coreset.benchmark_ids:
        missing = [item_ids.get(pk, str(pk)) for pk in fits[bid]["items"] if pk not in values]
        if missing:
            name = benchmarks[bid].name
            errors.add(f"benchmark {name!r}: the target's scores on {len(missing)} coreset item(s) are missing: "
                       f"{', '.join(map(str, missing[:20]))}{' ...' if len(missing) > 20 else ''}",
                       field="scores", benchmark=name, items=missing)
    errors.raise_if_any("every coreset item of every benchmark needs a score (score-based predictors use them all)")

    entries: dict[str, dict[str, Any]] = {}
    parts: list[tuple[str, float, np.ndarray, float, float]] = []  # capability, estimate, errors, scale lo, hi
    any_extrapolation = False
    for bid in coreset.benchmark_ids:
        benchmark, fit = benchmarks[bid], fits[bid]
        X = np.asarray(fit["X_ref"], dtype=float)
        y = np.asarray(fit["y_ref"], dtype=float)
        x = np.array([values[pk] for pk in fit["items"]], dtype=float)
        flag = extrapolation_flag(float(x.mean()), X.mean(axis=1))
        any_extrapolation |= flag
        name = guarded_predictor(flag, stored, explicit)
        calibration = fit.get("calibration") or {}
        if calibration.get("kind") == "cross_fitted" and calibration.get("predictor") == name:
            cal_errors = np.asarray(calibration["errors"], dtype=float)
            raw = float(predictor_factory(name, fit)().fit(X, y).predict(x[None, :])[0])
            raw_lo, raw_hi = interval_from_errors(raw, cal_errors, level)
            cal_kind = "cross_fitted"
        else:  # AIPW for an extrapolated target, the irt predictor, or an older coreset
            ci = loo_conformal_interval(predictor_factory(name, fit), X, y, x, level=level, method="split")
            assert ci.loo_errors is not None  # split-conformal intervals keep their signed LOO errors
            raw, raw_lo, raw_hi, cal_errors = float(ci.center[0]), ci.lower[0], ci.upper[0], ci.loo_errors
            cal_kind = "leave_one_reference_out"
        lo_s, hi_s = _scale(benchmark)
        center = _clip(raw, lo_s, hi_s)
        lower = _clip(float(raw_lo), lo_s, hi_s)
        upper = _clip(float(raw_hi), lo_s, hi_s)
        parts.append((benchmark.capability or benchmark.name, center, cal_errors, lo_s, hi_s))
        entries[benchmark.name] = {
            "estimate": center, "interval": [finite_or_none(lower), finite_or_none(upper)], "std_error": None,
            "predictor": name, "extrapolation": flag, "n_items": int(len(x)), "n_total": int(fit["n_items"]),
            "calibration": cal_kind,
            "method": f"{coreset.method}+{name}",
        }

    def combine(group: list[tuple[str, float, np.ndarray, float, float]]) -> dict[str, Any]:
        # the aggregate (mean of the benchmark estimates) is calibrated on its own held-out errors,
        # reference by reference (every benchmark has the same references): app.core.intervals.pooled_errors
        est = float(np.mean([p[1] for p in group]))
        lower, upper = interval_from_errors(est, pooled_errors(np.vstack([p[2] for p in group])), level)
        lo_s, hi_s = float(np.mean([p[3] for p in group])), float(np.mean([p[4] for p in group]))
        return {"estimate": est, "interval": [finite_or_none(_clip(float(lower), lo_s, hi_s)),
                                              finite_or_none(_clip(float(upper), lo_s, hi_s))],
                "std_error": None, "n_benchmarks": len(group), "n_benchmarks_total": len(group)}

    capabilities: dict[str, dict[str, Any]] = {}
    for cap in dict.fromkeys(p[0] for p in parts):
        capabilities[cap] = combine([p for p in parts if p[0] == cap])
    overall = combine(parts)
    return {"coreset": coreset.id, "model": model_name, "level": level, "benchmarks": entries,
            "capabilities": capabilities, "overall": overall, "extrapolation": bool(any_extrapolation),
            "agreement": None}


def reference_predictions(session: Session, coreset: Coreset, level: float) -> list[dict[str, Any]]:
    """Each reference model's full-benchmark score, true and predicted out of fold, with the interval
    that :func:`predict` would give it (``interval_from_errors`` on the stored cross-fitted errors).

    The stored errors are ``y_i - f_{-fold(i)}(i)`` (``app.core.intervals.cross_fitted_errors``), so
    the held-out prediction is ``y_i - error_i``: the whole pipeline, selection included, never saw
    model ``i``. Benchmarks without cross-fitted errors (the irt predictor, older coresets) are
    left out. Rows: ``{model, benchmark, true, predicted, lo, hi}``.
    """
    names = list((coreset.diagnostics or {}).get("reference_models") or [])
    fits = load_fits(session, coreset)
    benchmarks = {b.id: b for b in session.scalars(select(Benchmark).where(Benchmark.id.in_(coreset.benchmark_ids)))}
    rows: list[dict[str, Any]] = []
    for bid in coreset.benchmark_ids:
        fit = fits.get(bid) or {}
        calibration = fit.get("calibration") or {}
        if calibration.get("kind") != "cross_fitted" or bid not in benchmarks:
            continue
        truth = np.asarray(fit["y_ref"], dtype=float)
        errors = np.asarray(calibration["errors"], dtype=float)
        held_out = truth - errors
        lower, upper = interval_from_errors(held_out, errors, level)
        lo_s, hi_s = _scale(benchmarks[bid])
        for i, name in enumerate(names[:len(truth)]):
            rows.append({"model": name, "benchmark": benchmarks[bid].name, "true": float(truth[i]),
                         "predicted": _clip(float(held_out[i]), lo_s, hi_s),
                         "lo": finite_or_none(_clip(float(lower[i]), lo_s, hi_s)),
                         "hi": finite_or_none(_clip(float(upper[i]), lo_s, hi_s))})
    return rows
