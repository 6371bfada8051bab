"""Evaluation-supervised (score-based) coresets (papers/002): validation, the selection job, predictions.

The science is ``app.core.selection.score_based`` (selectors), ``app.core.irt`` (IRT anchors and
p-IRT / gp-IRT), ``app.core.predictors`` and ``app.core.intervals``; this module moves data between
them and the database (see docs/DECISIONS.md "Score-based coresets").

* create: ``reference_models`` (a list or ``"all"``) with scores on every benchmark, at least
  :data:`MIN_REFERENCES`; ``predictor`` one of :data:`PREDICTORS`; budget an int total (split over
  the benchmarks by ``stratified_counts``, at least one each) or ``{"fraction": f}`` per benchmark.
* job (queue ``cpu``): per benchmark, the reference matrix (models x items, missing cells imputed by
  the item's mean over the references), the selector fitted with that benchmark's k_b; the
  coreset stores, in its deferred ``fitted_state`` column (``{"fits": {benchmark_id: fit}}``), the
  references' coreset scores ``X_ref`` and full-benchmark scores ``y_ref`` per benchmark (plus
  weights, lambda, IRT parameters) so that predict refits the predictor deterministically.
  ``diagnostics`` (returned by GET) keeps only ``fits_summary``: per benchmark ``n_items``, ``k``,
  ``lambda`` and ``n_references`` -- never arrays that grow with references x k.
  The job also stores ``calibration``: the references' cross-fitted errors (selector + predictor
  refitted on ten folds of the references, ``app.core.intervals.cross_fitted_errors``), so that
  intervals account for the coreset having been chosen on the same references.
* predict: per benchmark the stored predictor (AIPW when the target is outside the references'
  coreset means, unless the caller chose the predictor) and a split-conformal interval on the
  stored cross-fitted errors (leave-one-reference-out residuals for AIPW, the irt predictor and
  coresets without them); capabilities / overall = mean over benchmarks, its interval calibrated on the pooled
  per-reference errors (``app.core.intervals.pooled_errors``).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.selection.baselines import stratified_counts
from app.core.selection.base import ParamSpec
from app.core.selection.score_based import SCORE_METHODS, SCORE_PARAMS
from app.db.models import Benchmark, BenchmarkModel, Coreset, Item, Model
from app.kit.errors import ErrorCollector, InvalidInput
from app.coresets.repository import mark_coreset_failed, save_selection
from app.kit.jobs import JobContext, register
from app.benchmarks.score_matrix import load_matrix

KIND = "coreset_scores"
IRT_PARAMS: dict[str, ParamSpec] = {
    "dim": ParamSpec(int, "dimension of the 2PL ability / discrimination (default 1)"),
    "l2": ParamSpec(float, "L2 penalty of the 2PL fit (default 1.0)"),
}
METHOD_PARAMS: dict[str, dict[str, ParamSpec]] = {**SCORE_PARAMS, "irt": IRT_PARAMS}
METHODS = tuple(sorted(METHOD_PARAMS))
PREDICTORS = ("mean", "weighted_mean", "ridge", "kernel_ridge", "aipw", "irt")
DEFAULT_PREDICTOR = "kernel_ridge"
DEFAULT_LEVEL = 0.9
MIN_REFERENCES = 3  # LOO intervals need a few references; random_search (Search+) needs >= 3 for CV
CALIBRATION_FOLDS = 10  # folds of the references for the cross-fitted interval errors
WEIGHTED_METHODS = ("anchor_points", "irt")  # methods whose weights_ are non-negative item weights


def is_score_method(method: str) -> bool:
    return method in METHOD_PARAMS


# --------------------------------------------------------------------------- create


def check_params(method: str, params: dict[str, Any], seed: int, field: str = "params") -> dict[str, Any]:
    """422 unless ``params`` are valid constructor parameters of ``method`` (errors at ``field.<name>``)."""
    allowed = METHOD_PARAMS[method]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise InvalidInput(
            f"unknown parameter(s) {unknown} for method {method!r}; valid parameters: {sorted(allowed) or 'none'}",
            [{"field": f"{field}.{p}", "detail": f"valid: {sorted(allowed)}"} for p in unknown])
    errors = ErrorCollector()
    for name, value in params.items():
        spec = allowed[name]
        types = spec.type if isinstance(spec.type, tuple) else (spec.type,)
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not ok and float in types and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            errors.add(f"{name} must be of type {'/'.join(t.__name__ for t in types)} (got {value!r}); "
                       f"{spec.description}", field=f"{field}.{name}")
    errors.raise_if_any(f"invalid parameters for {method!r}")
    try:
        if method == "irt":
            dim, l2 = params.get("dim", 1), params.get("l2", 1.0)
            if dim < 1:
                raise ValueError(f"dim must be >= 1, got {dim!r}")
            if not (math.isfinite(l2) and l2 > 0):
                raise ValueError(f"l2 must be > 0, got {l2!r}")
        else:
            selector = SCORE_METHODS[method](k=1, seed=seed, **params)
            if hasattr(selector, "validate_params"):
                selector.validate_params()
            else:  # MRMR validates inside fit: a tiny dummy fit
                rng = np.random.default_rng(0)
                selector.fit(rng.integers(0, 2, size=(6, 4)).astype(float))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"invalid parameters for {method!r}: {exc}", [{"field": field, "detail": str(exc)}]) from None
    return params


def _item_pks(session: Session, benchmark: Benchmark) -> list[int]:
    return list(session.scalars(select(Item.pk).where(Item.benchmark_id == benchmark.id).order_by(Item.pk)))


def _reference_names(session: Session, benchmarks: list[Benchmark], refs: list[str] | str) -> list[str]:
    """Reference model names (sorted) that have scores on every benchmark; 422 otherwise."""
    from app.models.service import get_model

    having = {b.id: set(session.scalars(
        select(Model.name).join(BenchmarkModel, BenchmarkModel.model_id == Model.id)
        .where(BenchmarkModel.benchmark_id == b.id))) for b in benchmarks}
    if refs == "all":
        names = set.intersection(*having.values()) if having else set()
        return sorted(names)
    if isinstance(refs, str) or not all(isinstance(r, str) for r in refs):
        raise InvalidInput('reference_models must be a list of model names or "all"',
                           [{"field": "reference_models", "detail": f"got {refs!r}"}])
    names = [get_model(session, r).name for r in refs]
    if len(set(names)) != len(names):
        raise InvalidInput("a reference model is named twice", [{"field": "reference_models", "detail": "duplicates"}])
    errors = ErrorCollector()
    for b in benchmarks:
        for n in names:
            if n not in having[b.id]:
                errors.add(f"reference model {n!r} has no scores on benchmark {b.name!r}",
                           field="reference_models", model=n, benchmark=b.name)
    errors.raise_if_any("reference models without scores")
    return sorted(names)


def create(session: Session, request: Any, benchmarks: list[Benchmark], params: dict[str, Any]) -> tuple[Any, list[str], dict[str, Any]]:
    """Validate a score-based request. Returns (request with the effective predictor, reference
    names, job payload)."""
    method = request.method
    predictor = request.predictor
    if predictor is not None and predictor not in PREDICTORS:
        raise InvalidInput(f"unknown predictor {predictor!r}; valid predictors: {', '.join(PREDICTORS)}",
                           [{"field": "predictor", "detail": f"one of {list(PREDICTORS)}"}])
    if predictor == "irt" and method != "irt":
        raise InvalidInput("predictor 'irt' (p-IRT / gp-IRT) needs method 'irt' (its fitted 2PL item parameters)",
                           [{"field": "predictor", "detail": "irt only with method irt"}])
    if request.reference_models is None:
        raise InvalidInput(
            f"score-based method {method!r} needs reference_models (a list of model names or \"all\"), "
            f"at least {MIN_REFERENCES} with scores on every benchmark",
            [{"field": "reference_models", "detail": f"at least {MIN_REFERENCES} models"}])
    sizes = [len(_item_pks(session, b)) for b in benchmarks]
    errors = ErrorCollector()
    for b, n in zip(benchmarks, sizes):
        if n == 0:
            errors.add(f"benchmark {b.name!r} has no items", field="benchmarks", benchmark=b.name)
    errors.raise_if_any("benchmarks cannot be used")
    counts = plan_counts(request.budget, sizes, [b.name for b in benchmarks])
    names = _reference_names(session, benchmarks, request.reference_models)
    if len(names) < MIN_REFERENCES:
        raise InvalidInput(
            f"score-based method {method!r} needs at least {MIN_REFERENCES} reference models with scores on "
            f"every benchmark ({', '.join(b.name for b in benchmarks)}); {len(names)} qualify"
            + (f" ({', '.join(names)})" if names else ""),
            [{"field": "reference_models", "detail": f"at least {MIN_REFERENCES} reference models", "found": len(names)}])
    if method == "irt" or predictor == "irt":
        for b in benchmarks:
            matrix = load_matrix(session, b, b.default_metric)
            rows = [i for i, n in enumerate(matrix.model_names) if n in set(names)]
            vals = np.asarray(matrix.values)[rows]
            vals = vals[~np.isnan(vals)]
            if vals.size and (vals.min() < 0 or vals.max() > 1):
                raise InvalidInput(f"IRT needs scores in [0, 1]; benchmark {b.name!r} has scores outside",
                                   [{"field": "method", "detail": "irt needs scores in [0, 1]"}])
    effective = replace(request, predictor=predictor or DEFAULT_PREDICTOR)
    payload = {"method": method, "k": int(sum(counts)), "per_benchmark": [int(c) for c in counts],
               "predictor_explicit": predictor is not None, "references": names}
    return effective, names, payload


def plan_counts(budget: Any, sizes: list[int], names: list[str]) -> list[int]:
    from app.coresets.service import plan_budget

    plan = plan_budget(budget, sizes, names, stratified=True)
    if plan.per_benchmark is not None:
        return list(plan.per_benchmark)
    return [int(c) for c in stratified_counts(np.asarray(sizes), plan.total)]


# --------------------------------------------------------------------------- the job


def _reference_block(session: Session, benchmark: Benchmark, names: list[str]) -> tuple[list[int], np.ndarray]:
    """(item pks, references x items scores with NaN where missing), rows in ``names`` order."""
    matrix = load_matrix(session, benchmark, benchmark.default_metric)
    row_of = {n: i for i, n in enumerate(matrix.model_names)}
    values = np.full((len(names), len(matrix.item_pks)), np.nan)
    for r, n in enumerate(names):
        if n in row_of:
            values[r] = np.asarray(matrix.values)[row_of[n]]
    return [int(pk) for pk in matrix.item_pks], values


def impute(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Missing cells -> the item's mean over the references (0 for an item nobody has)."""
    missing = np.isnan(values)
    if not missing.any():
        return values, 0
    with np.errstate(all="ignore"):
        means = np.nanmean(values, axis=0)
    means = np.where(np.isnan(means), 0.0, means)
    return np.where(missing, means[None, :], values), int(missing.sum())


def _fit_selector(method: str, params: dict[str, Any], seed: int, k: int, Y: np.ndarray) -> Any:
    if method == "irt":
        from app.core.irt import IRTSelection

        return IRTSelection(k=k, seed=seed, dim=int(params.get("dim", 1)), l2=float(params.get("l2", 1.0))).fit(Y)
    return SCORE_METHODS[method](k=k, seed=seed, **params).fit(Y)


def _cross_fitted_calibration(method: str, params: dict[str, Any], seed: int, k: int, Y: np.ndarray,
                              y: np.ndarray, predictor: str) -> dict[str, Any]:
    """Held-out errors of the whole pipeline (selector + predictor refitted on each of
    :data:`CALIBRATION_FOLDS` folds of the references; ``app.core.intervals.cross_fitted_errors``),
    stored so that predict's interval accounts for the coreset having been chosen on these
    references. Falls back to predict-time leave-one-reference-out residuals (``kind: "loo"``)
    when a fold is too small for the selector."""
    from app.core.intervals import coreset_cross_fitted_errors

    def select(Y_train: np.ndarray) -> tuple[np.ndarray, list[float] | None]:
        fitted = _fit_selector(method, params, seed, k, Y_train)
        w = getattr(fitted, "weights_", None)
        keep = method in WEIGHTED_METHODS and w is not None
        return np.asarray(fitted.ranking_, dtype=np.int64), np.asarray(w, dtype=float).tolist() if keep else None

    try:
        errors = coreset_cross_fitted_errors(select, lambda w: predictor_factory(predictor, {"weights": w}), Y, y,
                                             n_folds=CALIBRATION_FOLDS, seed=seed)
    except ValueError as exc:
        return {"kind": "loo", "reason": f"cross-fitting failed: {exc}"}
    return {"kind": "cross_fitted", "predictor": predictor, "n_folds": min(CALIBRATION_FOLDS, len(y)),
            "errors": errors.tolist()}


@register(KIND, queue="cpu")
def run_score_coreset(ctx: JobContext) -> dict[str, Any]:
    coreset_id = ctx.payload["coreset_id"]
    try:
        return select_score_coreset(ctx, coreset_id, ctx.payload["per_benchmark"], ctx.payload["references"],
                                    bool(ctx.payload.get("predictor_explicit")))
    except Exception as exc:
        mark_coreset_failed(ctx, coreset_id, exc)
        raise


def select_score_coreset(ctx: JobContext, coreset_id: str, per_benchmark: list[int], names: list[str],
                         predictor_explicit: bool) -> dict[str, Any]:
    started = time.perf_counter()
    with ctx.session_factory() as session:
        coreset = session.get(Coreset, coreset_id)
        if coreset is None:
            raise LookupError(f"coreset {coreset_id} vanished")
        method, params, seed = coreset.method, dict(coreset.params or {}), coreset.seed
        predictor = coreset.predictor or DEFAULT_PREDICTOR
        benchmark_ids = list(coreset.benchmark_ids)
        blocks = []
        for bid in benchmark_ids:
            benchmark = session.get(Benchmark, bid)
            if benchmark is None:
                raise InvalidInput(f"benchmark {bid} was deleted since the coreset was requested")
            blocks.append(_reference_block(session, benchmark, names))
    ctx.progress(0.1)

    picks: list[tuple[float, int, int, float | None, float | None]] = []
    fits: dict[str, Any] = {}
    imputed: dict[str, int] = {}
    for b, (bid, k_b, (item_pks, raw)) in enumerate(zip(benchmark_ids, per_benchmark, blocks)):
        keep = ~np.all(np.isnan(raw), axis=1)
        if int(keep.sum()) < MIN_REFERENCES:
            raise InvalidInput(f"fewer than {MIN_REFERENCES} reference models still have scores on benchmark {bid}")
        Y, n_imputed = impute(raw)
        imputed[bid] = n_imputed
        fitted = _fit_selector(method, params, seed, k_b, Y)
        ranking = np.asarray(fitted.ranking_, dtype=np.int64)
        gains = np.asarray(getattr(fitted, "gains_", np.full(len(ranking), np.nan)), dtype=float)
        weights = getattr(fitted, "weights_", None)
        weights = None if weights is None else np.asarray(weights, dtype=float)
        for r, (col, gain) in enumerate(zip(ranking.tolist(), gains.tolist())):
            picks.append(((r + 1) / k_b, b, item_pks[col], gain if np.isfinite(gain) else None,
                          None if weights is None or not np.isfinite(weights[r]) else float(weights[r])))
        X_ref = Y[:, ranking]
        y_ref = Y.mean(axis=1)
        fit: dict[str, Any] = {
            "items": [item_pks[c] for c in ranking.tolist()], "n_items": len(item_pks),
            "X_ref": X_ref.tolist(), "y_ref": y_ref.tolist(),
            "weights": weights.tolist() if method in WEIGHTED_METHODS and weights is not None else None,
            "lambda": None, "irt": None,
        }
        if predictor in ("ridge", "kernel_ridge"):
            fit["lambda"] = float(predictor_factory(predictor, fit)().fit(X_ref, y_ref).lambda_)
        if predictor != "irt":
            fit["calibration"] = _cross_fitted_calibration(method, params, seed, k_b, Y, y_ref, predictor)
        if predictor == "irt":
            from app.core.irt import IRTPredictor

            dim, l2 = int(params.get("dim", 1)), float(params.get("l2", 1.0))
            a, b_, theta = fitted.a_, fitted.b_, fitted.theta_
            irt = IRTPredictor(dim=dim, l2=l2, seed=seed).fit(
                Y, ranking, weights=fit["weights"], item_params=(a, b_, theta))
            fit["irt"] = {"a": np.asarray(a).tolist(), "b": np.asarray(b_).tolist(),
                          "theta": np.asarray(theta).tolist(), "lam": float(irt.lam_), "dim": dim, "l2": l2,
                          "selected": ranking.tolist()}
        fits[bid] = fit
        ctx.progress(0.1 + 0.8 * (b + 1) / len(benchmark_ids))

    picks.sort(key=lambda p: (p[0], p[1]))
    rows = [{"coreset_id": coreset_id, "rank": r + 1, "item_pk": int(p[2]), "benchmark_id": benchmark_ids[p[1]],
             "gain": p[3], "weight": p[4]} for r, p in enumerate(picks)]
    diagnostics = {
        "k": len(rows), "per_benchmark": {bid: int(k_b) for bid, k_b in zip(benchmark_ids, per_benchmark)},
        "reference_models": names, "n_references": len(names), "imputed_cells": imputed,
        "predictor": predictor, "predictor_explicit": predictor_explicit, "fits_summary": fits_summary(fits),
        "seconds": round(time.perf_counter() - started, 3),
    }
    save_selection(ctx, coreset_id, rows, diagnostics, fitted_state={"fits": fits})
    return {"coreset_id": coreset_id, "n_items": len(rows), "per_benchmark": diagnostics["per_benchmark"],
            "imputed_cells": imputed, "seconds": diagnostics["seconds"]}


def fits_summary(fits: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The small, user-facing part of the fits (``diagnostics.fits_summary``); no per-reference arrays."""
    return {bid: {"n_items": int(fit["n_items"]), "k": len(fit["items"]), "lambda": fit.get("lambda"),
                  "n_references": len(fit["y_ref"]),
                  "calibration": (fit.get("calibration") or {}).get("kind", "loo")} for bid, fit in fits.items()}


# --------------------------------------------------------------------------- predict


class _IRTAdapter:
    """gp-IRT with the coreset's stored 2PL item parameters; ``fit`` keeps them fixed (so its LOO
    residuals are in-sample with respect to the 2PL fit, see docs/DECISIONS.md)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def fit(self, X: np.ndarray, y: np.ndarray) -> _IRTAdapter:
        from app.core.irt import IRTPredictor, item_curve

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
    from app.core.predictors import PREDICTOR_CLASSES, MeanPredictor, WeightedMeanPredictor

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


def _num(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def load_fits(session: Session, coreset: Coreset) -> dict[str, Any]:
    """The stored fits, read explicitly from the deferred ``fitted_state`` column (a coreset written
    before it existed kept them in ``diagnostics["fits"]``; migration 0006 moves them)."""
    state = session.scalar(select(Coreset.fitted_state).where(Coreset.id == coreset.id))
    if state and state.get("fits"):
        return state["fits"]
    return (coreset.diagnostics or {}).get("fits") or {}


def predict(session: Session, coreset: Coreset, values: dict[int, float], model_name: str | None,
            level: float | None) -> dict[str, Any]:
    from app.core.intervals import extrapolation_flag, interval_from_errors, loo_conformal_interval, pooled_errors

    level = DEFAULT_LEVEL if level is None else float(level)
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
        name = "aipw" if flag and not explicit else stored
        calibration = fit.get("calibration") or {}
        if calibration.get("kind") == "cross_fitted" and calibration.get("predictor") == name:
            cal_errors = np.asarray(calibration["errors"], dtype=float)
            raw = float(predictor_factory(name, fit)().fit(X, y).predict(x[None, :])[0])
            raw_lo, raw_hi = interval_from_errors(raw, cal_errors, level)
            cal_kind = "cross_fitted"
        else:  # AIPW for an extrapolated target, the irt predictor, or an older coreset
            ci = loo_conformal_interval(predictor_factory(name, fit), X, y, x, level=level, method="split")
            raw, raw_lo, raw_hi, cal_errors = float(ci.center[0]), ci.lower[0], ci.upper[0], ci.loo_errors
            cal_kind = "leave_one_reference_out"
        lo_s, hi_s = _scale(benchmark)
        center = _clip(raw, lo_s, hi_s)
        lower = _clip(float(raw_lo), lo_s, hi_s)
        upper = _clip(float(raw_hi), lo_s, hi_s)
        parts.append((benchmark.capability or benchmark.name, center, cal_errors, lo_s, hi_s))
        entries[benchmark.name] = {
            "estimate": center, "interval": [_num(lower), _num(upper)], "std_error": None,
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
        return {"estimate": est, "interval": [_num(_clip(float(lower), lo_s, hi_s)), _num(_clip(float(upper), lo_s, hi_s))],
                "std_error": None, "n_benchmarks": len(group), "n_benchmarks_total": len(group)}

    capabilities: dict[str, dict[str, Any]] = {}
    for cap in dict.fromkeys(p[0] for p in parts):
        capabilities[cap] = combine([p for p in parts if p[0] == cap])
    overall = combine(parts)
    return {"coreset": coreset.id, "model": model_name, "level": level, "benchmarks": entries,
            "capabilities": capabilities, "overall": overall, "extrapolation": bool(any_extrapolation),
            "agreement": None}
