"""Predictions of score-based coresets (papers/002 §2.3, App. L.1): the stored predictor per
benchmark, guarded against extrapolation, with intervals calibrated on the references.

``fitted_state["fits"][benchmark_id]`` (written by the selection job, ``score_based``) holds the
references' coreset scores ``X_ref``, full scores ``y_ref``, weights, lambda, the IRT parameters and
the cross-fitted ``calibration`` errors, so predict refits deterministically without the matrix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from threading import Lock
from typing import Any

import numpy as np
from cachetools import LRUCache
from sqlalchemy import select
from sqlalchemy.orm import Session

from evalplan.auth.scoping import unscoped
from evalplan.benchmarks.repository import benchmark_map, item_ids_by_pk
from evalplan.core.coresets.auto import AveragePredictor
from evalplan.core.coresets.intervals import (
    DEFAULT_INTERVAL,
    conformal_half_width,
    extrapolation_flag,
    guarded_predictor,
    loo_conformal_interval,
    pooled_errors,
    top_widened_interval,
)
from evalplan.core.coresets.predictors import PREDICTOR_CLASSES, MeanPredictor, WeightedMeanPredictor
from evalplan.core.irt.irt import IRTPredictor
from evalplan.coresets.families.design_predictions import DESIGN, design_predict_many, design_reference_rows
from evalplan.coresets.families.interval_answers import extend, loo_why
from evalplan.db.models import Benchmark, Coreset
from evalplan.kit.errors import Conflict, ErrorCollector
from evalplan.kit.validation import finite_or_none

PREDICTORS = ("mean", "weighted_mean", "ridge", "kernel_ridge", "aipw", "gp_irt", "p_irt", "irt")
#: a stored ``auto`` fit may also hold ``average`` (the mean of its ``components``; ``evalplan.core.coresets.auto``)
DEFAULT_PREDICTOR = "kernel_ridge"


IRT_PREDICTORS = ("gp_irt", "p_irt", "irt")  # "irt" is gp-IRT (its name before p-IRT was offered)


class _IRTAdapter:
    """tinyBenchmarks' p-IRT / gp-IRT (``evalplan.core.irt.irt.IRTPredictor``) with the coreset's stored IRT
    model and lambda; ``fit`` keeps them fixed (the model was fitted on the references at selection).

    A coreset stored before the tinyBenchmarks rewrite (no ``kind``) kept a 2PL with the difficulty
    subtracted once, ``sigmoid(a . theta - b)``; it is the same curve with ``b / dim`` per dimension."""

    def __init__(self, spec: dict[str, Any], variant: str, n_items: int) -> None:
        self.spec, self.variant, self.n_items = spec, variant, n_items

    def fit(self, X: np.ndarray, y: np.ndarray) -> _IRTAdapter:
        s = self.spec
        b = np.asarray(s["b"], dtype=float)
        a = np.asarray(s["a"], dtype=float).reshape(len(b), -1)
        if s.get("kind") != "tinybenchmarks":
            b = b / a.shape[1]
        dummy = np.zeros((1, len(b)))  # lambda is fixed, so only the shapes of Y_ref matter
        self.model_ = IRTPredictor(lam=float(s["lam"])).fit(dummy, s["selected"], weights=s.get("weights"),
                                                            item_params=(a, b))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        est = self.model_.predict(np.clip(np.asarray(X, dtype=float), 0.0, 1.0))
        return np.asarray(est.p_irt if self.variant == "p_irt" else est.gp_irt)


def predictor_factory(name: str, fit: dict[str, Any]) -> Any:
    """A zero-argument factory of predictor ``name`` for one benchmark's stored ``fit``."""
    if name == "weighted_mean":
        w = fit.get("weights")
        return (lambda: WeightedMeanPredictor(w)) if w is not None else MeanPredictor
    if name in IRT_PREDICTORS:
        variant = "p_irt" if name == "p_irt" else "gp_irt"
        return lambda: _IRTAdapter({**fit["irt"], "weights": fit.get("weights")}, variant, int(fit["n_items"]))
    if name == "average":
        parts = [predictor_factory(c, fit) for c in fit["components"]]
        return lambda: AveragePredictor(parts)
    if name in PREDICTOR_CLASSES:
        return PREDICTOR_CLASSES[name]
    raise ValueError(f"unknown predictor {name!r}")


def score_scale(benchmark: Benchmark) -> tuple[float, float]:
    """The benchmark's score bounds: [0, 1] for binary scores, else its declared min / max (infinite if none)."""
    if benchmark.score_kind == "binary":
        return 0.0, 1.0
    lo = benchmark.score_min if benchmark.score_min is not None else -np.inf
    hi = benchmark.score_max if benchmark.score_max is not None else np.inf
    return float(lo), float(hi)


def _clip(v: float, lo: float, hi: float) -> float:
    return float(min(max(v, lo), hi))


def interval_rule(coreset: Coreset) -> str:
    """The coreset's interval rule: ``params.interval``
    (``evalplan.core.coresets.intervals.INTERVAL_RULES`` or ``"design"``,
    ``design_predictions``), else :data:`~evalplan.core.coresets.intervals.DEFAULT_INTERVAL`. ``"calibrated"`` needs the
    stored fixed-coreset errors; a coreset selected before they were stored gets ``"conformal"``."""
    return str((coreset.params or {}).get("interval") or DEFAULT_INTERVAL)


def load_fits(session: Session, coreset: Coreset) -> dict[str, Any]:
    """The stored fits, read explicitly from the deferred ``fitted_state`` column (a coreset written
    before it existed kept them in ``diagnostics["fits"]``; migration 0006 moves them)."""
    state = session.scalar(select(Coreset.fitted_state).where(Coreset.id == coreset.id))
    if state and state.get("fits"):
        return state["fits"]
    return (coreset.diagnostics or {}).get("fits") or {}


@dataclass
class _Prepared:
    """What predict needs of one ready coreset, parsed once and kept in :data:`_PREPARED`: the fits,
    the coreset items' ids, each benchmark's name / capability / scale, and the fitted predictors."""

    fits: dict[str, Any]
    item_ids: dict[int, str]
    names: dict[str, str]
    capabilities: dict[str, str]
    scales: dict[str, tuple[float, float]]
    fitted: dict[tuple[str, str], Any] = field(default_factory=dict)
    X_means: dict[str, np.ndarray] = field(default_factory=dict)
    loo_errors: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)


_PREPARED_SIZE = 32
_PREPARED: LRUCache[tuple[str, Any], _Prepared] = LRUCache(maxsize=_PREPARED_SIZE)
_PREPARED_LOCK = Lock()


def _prepared(session: Session, coreset: Coreset) -> _Prepared:
    """The coreset's parsed state, cached by (id, updated_at): a ready coreset's fits never change
    without its row changing, and a refit is deterministic, so a cached predictor is the one predict
    would refit.

    The state is a function of the coreset alone, never of who asks: its own benchmarks' names and
    scales are read without the team scoping (issue 32 item 4: another team predicting first on a
    published coreset built on a private benchmark read no benchmark, answered 500 and cached the empty
    state for the owner too). Whether the caller may use the coreset's items was decided before, by the
    cells of ``evalplan.coresets.predict`` (``curation.published_reads``)."""
    key = (coreset.id, coreset.updated_at)
    with _PREPARED_LOCK:
        if key in _PREPARED:
            return _PREPARED[key]  # a hit is the most recently used
    fits = load_fits(session, coreset)
    with unscoped(session):
        benchmarks = benchmark_map(session, coreset.benchmark_ids)
    missing = [bid for bid in coreset.benchmark_ids if bid not in benchmarks or bid not in fits]
    if missing:  # a deleted benchmark (only an unpublished coreset's can be) or a coreset without fits
        raise Conflict(f"coreset {coreset.id} cannot predict: its stored state lacks benchmark(s) "
                       f"{', '.join(missing)}", [{"field": "coreset", "detail": "create a new version"}])
    all_pks = [pk for fit in fits.values() for pk in fit["items"]]
    item_ids = item_ids_by_pk(session, all_pks)
    prep = _Prepared(fits=fits, item_ids=item_ids, names={bid: b.name for bid, b in benchmarks.items()},
                     capabilities={bid: b.capability or b.name for bid, b in benchmarks.items()},
                     scales={bid: score_scale(b) for bid, b in benchmarks.items()})
    for bid, fit in fits.items():
        prep.X_means[bid] = np.asarray(fit["X_ref"], dtype=float).mean(axis=1)
    with _PREPARED_LOCK:
        _PREPARED[key] = prep  # the least recently used leaves beyond _PREPARED_SIZE
    return prep


def _fitted(prep: _Prepared, bid: str, name: str) -> Any:
    """Predictor ``name`` fitted on benchmark ``bid``'s references (once per cached coreset)."""
    key = (bid, name)
    if key not in prep.fitted:
        fit = prep.fits[bid]
        prep.fitted[key] = predictor_factory(name, fit)().fit(np.asarray(fit["X_ref"], dtype=float),
                                                              np.asarray(fit["y_ref"], dtype=float))
    return prep.fitted[key]


def reference_loo_errors(fit: dict[str, Any], name: str) -> np.ndarray:
    """The signed leave-one-reference-out errors of predictor ``name`` on one benchmark's stored ``fit``
    (``loo_conformal_interval``'s ``loo_errors``: M refits on the references, independent of any target)."""
    X = np.asarray(fit["X_ref"], dtype=float)
    ci = loo_conformal_interval(predictor_factory(name, fit), X, np.asarray(fit["y_ref"], dtype=float), X[:1],
                                level=0.5, method="split")
    assert ci.loo_errors is not None  # split-conformal intervals keep their signed LOO errors
    return ci.loo_errors


def _loo_errors(prep: _Prepared, bid: str, name: str) -> np.ndarray:
    """:func:`reference_loo_errors` of benchmark ``bid``: stored by the selection job (``fit["loo_errors"]``,
    the extrapolation guard's AIPW: M refits), else
    computed once per cached coreset, never per request."""
    key = (bid, name)
    if key not in prep.loo_errors:
        fit = prep.fits[bid]
        stored = (fit.get("loo_errors") or {}).get(name)
        prep.loo_errors[key] = (np.asarray(stored, dtype=float) if stored is not None
                                else reference_loo_errors(fit, name))
    return prep.loo_errors[key]


def predict(session: Session, coreset: Coreset, values: dict[int, float], model_name: str | None,
            level: float) -> dict[str, Any]:
    """One target: :func:`predict_many` of one."""
    return predict_many(session, coreset, [(values, model_name)], level)[0]


def predict_many(session: Session, coreset: Coreset, targets: list[tuple[dict[int, float], str | None]],
                 level: float) -> list[dict[str, Any]]:
    """Per target and benchmark the stored predictor (the extrapolation guard's AIPW for a target
    outside the references' coreset means, unless the caller chose the predictor) with a
    split-conformal interval on the stored cross-fitted errors; capabilities and overall on the pooled
    per-reference errors. The predictors are fitted once per coreset (cached) and applied to all the
    targets of a benchmark in one call, so a batch costs little more per target than its arithmetic."""
    diagnostics = coreset.diagnostics or {}
    prep = _prepared(session, coreset)
    fits = prep.fits
    stored = diagnostics.get("predictor") or coreset.predictor or DEFAULT_PREDICTOR
    explicit = bool(diagnostics.get("predictor_explicit"))
    rule = interval_rule(coreset)
    errors = ErrorCollector()
    for values, model_name in targets:
        for bid in coreset.benchmark_ids:
            missing = [prep.item_ids.get(pk, str(pk)) for pk in fits[bid]["items"] if pk not in values]
            if missing:
                name = prep.names[bid]
                where = {"model": model_name} if len(targets) > 1 else {}
                errors.add(f"benchmark {name!r}: the target's scores on {len(missing)} coreset item(s) are missing: "
                           f"{', '.join(map(str, missing[:20]))}{' ...' if len(missing) > 20 else ''}",
                           field="scores", benchmark=name, items=missing, **where)
    errors.raise_if_any("every coreset item of every benchmark needs a score (score-based predictors use them all)")
    if rule == DESIGN:
        return design_predict_many(coreset.method, fits, list(coreset.benchmark_ids), prep.names, prep.capabilities,
                                   targets, level, coreset.id)

    T = len(targets)
    # per benchmark: (names chosen, centers, lower, upper, calibration kind, errors used) for every target
    per_bench: dict[str, dict[str, Any]] = {}
    for bid in coreset.benchmark_ids:
        fit = fits[bid]
        X_t = np.array([[values[pk] for pk in fit["items"]] for values, _ in targets], dtype=float)
        flags = [extrapolation_flag(float(row.mean()), prep.X_means[bid]) for row in X_t]
        own = fit.get("predictor") or stored  # method auto stores its choice per benchmark
        chosen = [guarded_predictor(flag, own, explicit) for flag in flags]
        centers, lowers, uppers = np.zeros(T), np.zeros(T), np.zeros(T)
        kinds: list[str] = [""] * T
        tops: list[bool | None] = [None] * T  # in the references' top decile (interval widened to their errors)
        used: list[np.ndarray] = [np.zeros(0)] * T
        used_fixed: list[np.ndarray | None] = [None] * T
        whys: list[str] = [""] * T  # which interval answered, and why (issue 35 item 1)
        calibration = fit.get("calibration") or {}
        for name in dict.fromkeys(chosen):
            rows = [t for t in range(T) if chosen[t] == name]
            residuals = ((fit.get("irt") or {}).get("residuals") or {}).get("p_irt" if name == "p_irt" else "gp_irt")
            fixed: np.ndarray | None = None
            if calibration.get("kind") == "cross_fitted" and calibration.get("predictor") == name:
                cal, kind = np.asarray(calibration["errors"], dtype=float), "cross_fitted"
                if calibration.get("fixed_errors") is not None:
                    fixed = np.asarray(calibration["fixed_errors"], dtype=float)
            elif name in IRT_PREDICTORS and residuals is not None:
                cal, kind = np.asarray(residuals, dtype=float), "reference_residuals"
            else:
                cal, kind = None, "leave_one_reference_out"
            if cal is not None:
                raw = np.asarray(_fitted(prep, bid, name).predict(X_t[rows]), dtype=float)
                lo, hi, top = top_widened_interval(raw, cal, level, fixed, rule, np.asarray(fit["y_ref"], dtype=float))
                lo, hi, why = extend(rule, raw, lo, hi, cal, fixed, np.asarray(fit["y_ref"], dtype=float), top, kind)
                centers[rows], lowers[rows], uppers[rows] = raw, lo, hi
                for j, t in enumerate(rows):
                    kinds[t], used[t], used_fixed[t], tops[t], whys[t] = kind, cal, fixed, bool(top[j]), why[j]
                continue
            # AIPW for an extrapolated target, or an older coreset: the split-conformal interval on the
            # leave-one-reference-out residuals (loo_conformal_interval), whose M refits depend on the
            # references alone: computed once per cached coreset (_loo_errors), not per request
            loo = _loo_errors(prep, bid, name)
            guarded = np.asarray(_fitted(prep, bid, name).predict(X_t[rows]), dtype=float)
            q = conformal_half_width(loo, level)
            centers[rows], lowers[rows], uppers[rows] = guarded, guarded - q, guarded + q
            for t in rows:
                kinds[t], used[t] = kind, loo
        per_bench[bid] = {"chosen": chosen, "flags": flags, "centers": centers, "lowers": lowers, "uppers": uppers,
                          "kinds": kinds, "errors": used, "fixed": used_fixed, "n": X_t.shape[1], "tops": tops,
                          "whys": [w or loo_why(chosen[t], bool(flags[t])) for t, w in enumerate(whys)]}

    Part = tuple[str, float, np.ndarray, float, float, np.ndarray | None, np.ndarray]

    def combine(group: list[Part]) -> dict[str, Any]:
        # the aggregate (mean of the benchmark estimates) is calibrated on its own held-out errors,
        # reference by reference (every benchmark has the same references):
        # evalplan.core.coresets.intervals.pooled_errors;
        # the "calibrated" rule pools the fixed-coreset errors the same way (when every benchmark has them)
        est = float(np.mean([p[1] for p in group]))
        fixed_parts = [p[5] for p in group]
        fixed = (pooled_errors(np.vstack([f for f in fixed_parts if f is not None]))
                 if all(f is not None and f.shape == group[0][2].shape for f in fixed_parts) else None)
        # the top-decile widening on the aggregate's own held-out predictions (mean of the references' truths)
        pooled = pooled_errors(np.vstack([p[2] for p in group]))
        truths = np.mean(np.vstack([p[6] for p in group]), axis=0)
        lower, upper, top = top_widened_interval(est, pooled, level, fixed, rule, truths)
        (lower,), (upper,), (why,) = extend(rule, np.array([est]), np.atleast_1d(lower), np.atleast_1d(upper), pooled,
                                            fixed, truths, np.atleast_1d(top), "pooled")
        lo_s, hi_s = float(np.mean([p[3] for p in group])), float(np.mean([p[4] for p in group]))
        return {"estimate": est, "interval": [finite_or_none(_clip(float(lower), lo_s, hi_s)),
                                              finite_or_none(_clip(float(upper), lo_s, hi_s))],
                "std_error": None, "n_benchmarks": len(group), "n_benchmarks_total": len(group),
                "interval_rule": rule if fixed is not None else "conformal", "interval_why": why}

    out: list[dict[str, Any]] = []
    for t, (_, model_name) in enumerate(targets):
        entries: dict[str, dict[str, Any]] = {}
        parts: list[Part] = []
        any_extrapolation = False
        for bid in coreset.benchmark_ids:
            pb = per_bench[bid]
            lo_s, hi_s = prep.scales[bid]
            center = _clip(float(pb["centers"][t]), lo_s, hi_s)
            lower = _clip(float(pb["lowers"][t]), lo_s, hi_s)
            upper = _clip(float(pb["uppers"][t]), lo_s, hi_s)
            any_extrapolation |= bool(pb["flags"][t])
            parts.append((prep.capabilities[bid], center, pb["errors"][t], lo_s, hi_s, pb["fixed"][t],
                          np.asarray(fits[bid]["y_ref"], dtype=float)))
            entries[prep.names[bid]] = {
                "estimate": center, "interval": [finite_or_none(lower), finite_or_none(upper)], "std_error": None,
                "predictor": pb["chosen"][t], "extrapolation": bool(pb["flags"][t]), "n_items": int(pb["n"]),
                "n_total": int(fits[bid]["n_items"]), "calibration": pb["kinds"][t],
                "interval_rule": rule if pb["fixed"][t] is not None else "conformal",
                "method": f"{coreset.method}+{pb['chosen'][t]}", "top_decile": pb["tops"][t],
                "interval_why": pb["whys"][t],
            }
        capabilities = {cap: combine([p for p in parts if p[0] == cap]) for cap in dict.fromkeys(p[0] for p in parts)}
        out.append({"coreset": coreset.id, "model": model_name, "level": level, "benchmarks": entries,
                    "capabilities": capabilities, "overall": combine(parts), "extrapolation": bool(any_extrapolation),
                    "agreement": None})
    return out


def reference_predictions(session: Session, coreset: Coreset, level: float) -> list[dict[str, Any]]:
    """Each reference model's full-benchmark score, true and predicted out of fold, with the interval
    that :func:`predict` would give it (``top_widened_interval`` on the stored cross-fitted errors).

    The stored errors are ``y_i - f_{-fold(i)}(i)`` (``evalplan.core.coresets.intervals.cross_fitted_errors``), so
    the held-out prediction is ``y_i - error_i``: the whole pipeline, selection included, never saw
    model ``i``. Benchmarks without cross-fitted errors (the irt predictor, older coresets) are
    left out. Rows: ``{model, benchmark, true, predicted, lo, hi}``.
    """
    names = list((coreset.diagnostics or {}).get("reference_models") or [])
    fits = load_fits(session, coreset)
    benchmarks = benchmark_map(session, coreset.benchmark_ids)
    if interval_rule(coreset) == DESIGN:
        return design_reference_rows(fits, list(coreset.benchmark_ids), {bid: b.name for bid, b in benchmarks.items()},
                                     names, level)
    rows: list[dict[str, Any]] = []
    for bid in coreset.benchmark_ids:
        fit = fits.get(bid) or {}
        calibration = fit.get("calibration") or {}
        if calibration.get("kind") != "cross_fitted" or bid not in benchmarks:
            continue
        truth = np.asarray(fit["y_ref"], dtype=float)
        errors = np.asarray(calibration["errors"], dtype=float)
        fixed = calibration.get("fixed_errors")
        held_out = truth - errors
        fixed_a = None if fixed is None else np.asarray(fixed, dtype=float)
        lower, upper, top = top_widened_interval(held_out, errors, level, fixed_a, interval_rule(coreset), truth)
        lower, upper, _ = extend(interval_rule(coreset), held_out, lower, upper, errors, fixed_a, truth, top,
                                 "cross_fitted")
        lo_s, hi_s = score_scale(benchmarks[bid])
        for i, name in enumerate(names[:len(truth)]):
            rows.append({"model": name, "benchmark": benchmarks[bid].name, "true": float(truth[i]),
                         "predicted": _clip(float(held_out[i]), lo_s, hi_s),
                         "lo": finite_or_none(_clip(float(lower[i]), lo_s, hi_s)),
                         "hi": finite_or_none(_clip(float(upper[i]), lo_s, hi_s))})
    return rows
