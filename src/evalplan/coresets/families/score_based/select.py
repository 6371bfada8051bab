"""The score-based family's selection job (``coreset_scores``, queue ``cpu``; papers/002).

Per benchmark, the reference matrix (models x items, missing cells imputed by the item's mean over the
references), the selector fitted with that benchmark's k_b; the coreset stores, in its deferred
``fitted_state`` column (``{"fits": {benchmark_id: fit}}``), the references' coreset scores ``X_ref`` and
full-benchmark scores ``y_ref`` per benchmark (plus weights, lambda, IRT parameters) so that predict refits
the predictor deterministically. ``diagnostics`` (returned by GET) keeps only ``fits_summary``: per
benchmark ``n_items``, ``k``, ``lambda`` and ``n_references`` -- never arrays that grow with references x k.
The job also stores ``calibration``: the references' cross-fitted errors (selector + predictor refitted on
ten folds of the references, ``evalplan.core.coresets.intervals.coreset_cross_fitted_errors``), so that intervals
account for the coreset having been chosen on the same references, and the fixed-coreset errors of the
``"calibrated"`` rule (``fixed_errors``); for the IRT predictors the IRT pipeline refitted on
:data:`~evalplan.core.irt.irt.IRT_CALIBRATION_FOLDS` folds and the in-sample residuals; for ``auto`` its
outer-fold errors and its choice's leave-one-reference-out errors.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from evalplan.benchmarks.repository import benchmark_by_id
from evalplan.benchmarks.score_matrix import load_matrix
from evalplan.core.coresets.auto import (
    CHOICE_RULE,
    INNER_FOLDS,
    MAX_SECONDS,
    OUTER_FOLDS,
    SE_MULT,
    auto_select,
    parse_selectors,
)
from evalplan.core.coresets.design_coreset import design_coreset
from evalplan.core.coresets.intervals import (
    GUARD_EXTRAPOLATED,
    base_rule,
    coreset_cross_fitted_errors,
    fixed_coreset_errors,
)
from evalplan.core.irt.irt import IRT_CALIBRATION_FOLDS, IRTSelection, irt_cross_fitted_errors, irt_predictor_for
from evalplan.core.selection.score_based import SCORE_METHODS
from evalplan.coresets.families import score_predictions
from evalplan.coresets.families.design_predictions import DESIGN
from evalplan.coresets.families.score_based.params import (
    CALIBRATION_FOLDS,
    DEFAULT_METHOD_SHARE,
    IRT_PARAMS,
    MIN_REFERENCES,
    NON_SELECTOR_PARAMS,
    WEIGHTED_METHODS,
    method_items,
)
from evalplan.coresets.families.score_predictions import (
    DEFAULT_PREDICTOR,
    IRT_PREDICTORS,
    predictor_factory,
    reference_loo_errors,
)
from evalplan.coresets.repository import load_for_job, save_selection
from evalplan.db.models import Benchmark
from evalplan.kit.errors import InvalidInput
from evalplan.kit.jobs import JobContext


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


def _irt_params(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The IRT options: ``irt``'s own params, or ``params.irt`` of another selector."""
    source = params if method == "irt" else dict(params.get("irt") or {})
    return {key: source[key] for key in IRT_PARAMS if key in source}


def _fit_selector(method: str, params: dict[str, Any], seed: int, k: int, Y: np.ndarray) -> Any:
    if method == "irt":
        return IRTSelection(k=k, seed=seed, **_irt_params(method, params)).fit(Y)
    return SCORE_METHODS[method](k=k, seed=seed, **{key: v for key, v in params.items()
                                                    if key not in NON_SELECTOR_PARAMS}).fit(Y)


def _irt_fit(method: str, params: dict[str, Any], seed: int, fitted: Any, Y: np.ndarray, ranking: np.ndarray,
             weights: list[float] | None) -> dict[str, Any]:
    """tinyBenchmarks' IRT model and gp-IRT lambda for the coreset (``evalplan.core.irt.irt``): the selector's
    own model for ``irt``, else the pipeline fitted on the references; and the references' residuals
    under it, which calibrate the interval (in-sample: the IRT model saw these references)."""
    pred = irt_predictor_for(Y, ranking, weights=weights, selector=fitted, seed=seed, **_irt_params(method, params))
    est = pred.predict(Y[:, ranking])
    y_ref = Y.mean(axis=1)
    dim = int(pred.a_.shape[1])
    return {"kind": "tinybenchmarks", "a": pred.a_.tolist(), "b": pred.b_.tolist(), "lam": float(pred.lam_),
            "bias": float(pred.bias_), "dim": dim, "selected": ranking.tolist(),
            "residuals": {"gp_irt": (y_ref - est.gp_irt).tolist(), "p_irt": (y_ref - est.p_irt).tolist()}}


def _cross_fitted_calibration(method: str, params: dict[str, Any], seed: int, k: int, Y: np.ndarray,
                              y: np.ndarray, predictor: str) -> dict[str, Any]:
    """Held-out errors of the whole pipeline (selector + predictor refitted on each of
    :data:`CALIBRATION_FOLDS` folds of the references; ``evalplan.core.coresets.intervals.cross_fitted_errors``),
    stored so that predict's interval accounts for the coreset having been chosen on these
    references. Falls back to predict-time leave-one-reference-out residuals (``kind: "loo"``)
    when a fold is too small for the selector."""
    def select(Y_train: np.ndarray) -> tuple[np.ndarray, list[float] | None]:
        fitted = _fit_selector(method, params, seed, k, Y_train)
        w = getattr(fitted, "weights_", None)
        keep = method in WEIGHTED_METHODS and w is not None
        return np.asarray(fitted.ranking_, dtype=np.int64), np.asarray(w, dtype=float).tolist() if keep else None

    if method == "irt":  # ten refits of tinyBenchmarks' SVI pipeline (2-3 fits of 2000 epochs each) are out of budget
        return {"kind": "loo", "reason": "method irt: the IRT pipeline is not refitted per fold"}
    try:
        errors = coreset_cross_fitted_errors(select, lambda w: predictor_factory(predictor, {"weights": w}), Y, y,
                                             n_folds=CALIBRATION_FOLDS, seed=seed)
    except ValueError as exc:
        return {"kind": "loo", "reason": f"cross-fitting failed: {exc}"}
    return {"kind": "cross_fitted", "predictor": predictor, "n_folds": min(CALIBRATION_FOLDS, len(y)),
            "errors": errors.tolist()}


def _irt_cross_fitted_calibration(method: str, params: dict[str, Any], seed: int, k: int, Y: np.ndarray,
                                  predictor: str, irt: dict[str, Any]) -> dict[str, Any]:
    """The IRT predictors' ``"calibrated"`` interval (``evalplan.core.irt.irt.irt_cross_fitted_errors``): held-out
    errors of the whole pipeline on :data:`IRT_CALIBRATION_FOLDS` folds of the references -- the IRT
    model at the dimension ``irt["dim"]`` chosen on all references, the selection (for ``irt``,
    tinyBenchmarks' anchors of the fold's model) and the estimate refitted without the fold -- as the
    pessimistic half, and the references' in-sample residuals under the stored IRT model
    (``irt["residuals"]``) as the optimistic half (``fixed_errors``). Falls back to
    ``{"kind": "reference_residuals"}`` (the conformal rule on the residuals) when a fold is too small."""
    variant = "p_irt" if predictor == "p_irt" else "gp_irt"
    options = {key: v for key, v in _irt_params(method, params).items() if key in ("epochs", "lr")}

    def select(Y_train: np.ndarray) -> tuple[np.ndarray, list[float] | None]:
        fitted = _fit_selector(method, params, seed, k, Y_train)
        w = getattr(fitted, "weights_", None)
        weights = np.asarray(w, dtype=float).tolist() if method in WEIGHTED_METHODS and w is not None else None
        return np.asarray(fitted.ranking_, dtype=np.int64), weights

    try:
        errors = irt_cross_fitted_errors(Y, variant, int(irt["dim"]), float(irt["bias"]), k,
                                         select=None if method == "irt" else select,
                                         n_folds=IRT_CALIBRATION_FOLDS, seed=seed, **options)
    except ValueError as exc:
        return {"kind": "reference_residuals", "reason": f"cross-fitting failed: {exc}"}
    return {"kind": "cross_fitted", "predictor": predictor, "source": "irt_folds",
            "n_folds": min(IRT_CALIBRATION_FOLDS, len(Y)), "errors": errors.tolist(),
            "fixed_errors": list(irt["residuals"][variant])}


def select_score_coreset(ctx: JobContext, coreset_id: str, per_benchmark: list[int], names: list[str],
                         predictor_explicit: bool) -> dict[str, Any]:
    started = time.perf_counter()
    coreset = load_for_job(ctx, coreset_id)
    method, params, seed = coreset.method, dict(coreset.params or {}), coreset.seed
    predictor = coreset.predictor or DEFAULT_PREDICTOR
    benchmark_ids = list(coreset.benchmark_ids)
    ranges: list[tuple[float, float]] = []
    with ctx.session_factory() as session:
        blocks = []
        for bid in benchmark_ids:
            benchmark = benchmark_by_id(session, bid)
            if benchmark is None:
                raise InvalidInput(f"benchmark {bid} was deleted since the coreset was requested")
            blocks.append(_reference_block(session, benchmark, names))
            ranges.append(score_predictions.score_scale(benchmark))
    ctx.progress(0.1)

    picks: list[tuple[float, int, int, float | None, float | None]] = []
    fits: dict[str, Any] = {}
    auto: dict[str, Any] = {}
    max_seconds = float(params.get("max_seconds", MAX_SECONDS))
    deadline = started + max_seconds if method == "auto" else None
    imputed: dict[str, int] = {}
    for b, (bid, k_b, (item_pks, raw)) in enumerate(zip(benchmark_ids, per_benchmark, blocks)):
        keep = ~np.all(np.isnan(raw), axis=1)
        if int(keep.sum()) < MIN_REFERENCES:
            raise InvalidInput(f"fewer than {MIN_REFERENCES} reference models still have scores on benchmark {bid}")
        Y, n_imputed = impute(raw)
        imputed[bid] = n_imputed
        if params.get("interval") == DESIGN:
            fits[bid], ranked = _design_fit(method, params, seed, k_b, Y, item_pks, ranges[b])
            picks.extend(((r + 1) / k_b, b, pk, None, w) for r, (pk, w) in enumerate(ranked))
            ctx.progress(0.1 + 0.8 * (b + 1) / len(benchmark_ids))
            continue
        if method == "auto":
            share = None if deadline is None else max(deadline - time.perf_counter(), 0.0) / (len(blocks) - b)
            auto_fit, auto_ranking, auto_weights, auto[bid] = _auto_fit(ctx, params, seed, k_b, Y, item_pks, share)
            for r, col in enumerate(auto_ranking.tolist()):
                w_r = None if auto_weights is None else auto_weights[r]
                picks.append(((r + 1) / k_b, b, item_pks[col], None,
                              None if w_r is None or not np.isfinite(w_r) else float(w_r)))
            fits[bid] = _with_guard_errors(auto_fit, predictor_explicit)
            ctx.progress(0.1 + 0.8 * (b + 1) / len(benchmark_ids))
            continue
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
        if predictor in IRT_PREDICTORS:
            fit["irt"] = _irt_fit(method, params, seed, fitted, Y, ranking, fit["weights"])
            if base_rule(params.get("interval")) == "calibrated":  # "conformal": the residuals alone
                calibration = _irt_cross_fitted_calibration(method, params, seed, k_b, Y, predictor, fit["irt"])
                if calibration["kind"] == "cross_fitted":
                    fit["calibration"] = calibration
        else:
            fit["calibration"] = _cross_fitted_calibration(method, params, seed, k_b, Y, y_ref, predictor)
            if fit["calibration"]["kind"] == "cross_fitted":  # the "calibrated" interval's optimistic half
                fit["calibration"]["fixed_errors"] = fixed_coreset_errors(predictor_factory(predictor, fit), X_ref,
                                                                          y_ref).tolist()
        fits[bid] = _with_guard_errors(fit, predictor_explicit)
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
    if method == "auto":
        diagnostics["auto"] = auto
    save_selection(ctx, coreset_id, rows, diagnostics, fitted_state={"fits": fits})
    return {"coreset_id": coreset_id, "n_items": len(rows), "per_benchmark": diagnostics["per_benchmark"],
            "imputed_cells": imputed, "seconds": diagnostics["seconds"]}


def _with_guard_errors(fit: dict[str, Any], predictor_explicit: bool) -> dict[str, Any]:
    """``fit`` with the extrapolation guard's AIPW leave-one-reference-out errors (``fit["loo_errors"]``), which
    predict's interval for a flagged target needs: M refits, done here once instead of on the first such
    predict of every serving process (issue 34, predict p99). None when the caller chose the predictor
    (the guard then keeps it)."""
    if not predictor_explicit:
        fit["loo_errors"] = {GUARD_EXTRAPOLATED: reference_loo_errors(fit, GUARD_EXTRAPOLATED).tolist()}
    return fit


def _design_fit(method: str, params: dict[str, Any], seed: int, k: int, Y: np.ndarray, item_pks: list[int],
                score_range: tuple[float, float]) -> tuple[dict[str, Any], list[tuple[int, float]]]:
    """One benchmark of ``params.interval: "design"`` (``evalplan.core.coresets.design_coreset``): the method selects
    ``round(method_share k)`` items, taken whole; the rest of ``k`` is the stratified draw. Returns the stored fit
    (``design``: the draw's state, ``X_ref`` the references' scores at its items) and the coreset rows
    ``(item pk, design weight 1 / pi)``: the method's items in its order, then the drawn ones."""
    lo, hi = score_range
    if not (np.isfinite(lo) and np.isfinite(hi)):
        lo, hi = (float(Y.min()) if not np.isfinite(lo) else lo), (float(Y.max()) if not np.isfinite(hi) else hi)
    fixed_k = method_items(k, float(params.get("method_share", DEFAULT_METHOD_SHARE)))
    fixed = (np.asarray(_fit_selector(method, params, seed, fixed_k, Y).ranking_, dtype=np.int64) if fixed_k
             else np.zeros(0, dtype=np.int64))
    design = design_coreset(Y, k, seed=seed, score_range=(lo, hi), take_all=fixed.tolist())
    weight = dict(zip(design.items.tolist(), (1.0 / design.inclusion).tolist()))
    taken = set(fixed.tolist())
    order = fixed.tolist() + [c for c in design.items.tolist() if c not in taken]
    fit: dict[str, Any] = {
        "items": [item_pks[c] for c in design.items.tolist()], "n_items": len(item_pks),
        "X_ref": Y[:, design.items].tolist(), "y_ref": Y.mean(axis=1).tolist(), "weights": None, "lambda": None,
        "irt": None, "design": {**design.state(), "method_items": int(fixed.size)},
    }
    return fit, [(item_pks[c], weight[c]) for c in order]


def _auto_fit(ctx: JobContext, params: dict[str, Any], seed: int, k: int, Y: np.ndarray, item_pks: list[int],
              max_seconds: float | None) -> tuple[dict[str, Any], np.ndarray, np.ndarray | None, dict[str, Any]]:
    """One benchmark of ``method: "auto"`` (``evalplan.core.coresets.auto.auto_select``): (the stored fit with the
    chosen predictor, the ranking, the item weights, ``diagnostics.auto[benchmark]``). The calibration
    is auto's outer-fold errors (the choice itself refitted without each fold) and the chosen
    predictor's leave-one-reference-out errors on the chosen coreset (``fixed_errors``)."""
    selectors = parse_selectors(params["selectors"]) if params.get("selectors") else None
    if selectors is not None and not np.all((Y >= 0) & (Y <= 1)):
        selectors = tuple(s for s in selectors if s.method != "irt")
        if not selectors:
            raise InvalidInput("method auto: the only selector asked for is irt, which needs scores in [0, 1]")
    result = auto_select(Y, k, seed=seed, selectors=selectors, outer_folds=int(params.get("outer_folds", OUTER_FOLDS)),
                         inner_folds=int(params.get("inner_folds", INNER_FOLDS)), max_seconds=max_seconds,
                         checkpoint=ctx.check_cancelled, choice=str(params.get("choice", CHOICE_RULE)),
                         se_mult=float(params.get("se_mult", SE_MULT)))
    choice = result.choice
    ranking = np.asarray(result.selection.idx, dtype=np.int64)
    weights = result.selection.weights
    X_ref = Y[:, ranking]
    fit: dict[str, Any] = {
        "items": [item_pks[c] for c in ranking.tolist()], "n_items": len(item_pks),
        "X_ref": X_ref.tolist(), "y_ref": Y.mean(axis=1).tolist(),
        "weights": None if weights is None else np.asarray(weights, dtype=float).tolist(),
        "lambda": None, "irt": None, "selector": choice.selector.method, "predictor": choice.predictor,
        "components": list(choice.components),
    }
    parts = list(choice.components) or [choice.predictor]
    if any(p in IRT_PREDICTORS for p in parts):
        fit["irt"] = _irt_fit("irt", dict(choice.selector.params), seed, result.selection.selector, Y, ranking,
                              fit["weights"])
    for p in parts:
        if p in ("ridge", "kernel_ridge") and fit["lambda"] is None:
            fit["lambda"] = float(predictor_factory(p, fit)().fit(X_ref, Y.mean(axis=1)).lambda_)
    fit["calibration"] = {"kind": "cross_fitted", "predictor": choice.predictor, "source": "auto_outer_folds",
                          "n_folds": len(result.outer), "errors": result.outer_errors.tolist()}
    if result.fixed_errors is not None:  # the "calibrated" rule's optimistic half, as the single-method path
        fit["calibration"]["fixed_errors"] = np.asarray(result.fixed_errors, dtype=float).tolist()
    return fit, ranking, weights, result.summary()


def fits_summary(fits: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The small, user-facing part of the fits (``diagnostics.fits_summary``); no per-reference arrays."""
    def irt(fit: dict[str, Any]) -> dict[str, Any] | None:
        s = fit.get("irt")
        return None if not s else {"dim": s.get("dim"), "gp_irt_lambda": s.get("lam"), "bias": s.get("bias")}

    def calibration(fit: dict[str, Any]) -> str:
        if fit.get("design"):
            return DESIGN
        if (fit.get("calibration") or {}).get("kind") == "cross_fitted":
            return "cross_fitted"
        if (fit.get("irt") or {}).get("residuals"):
            return "reference_residuals"
        return str((fit.get("calibration") or {}).get("kind", "loo"))

    return {bid: {"n_items": int(fit["n_items"]), "k": len(fit["items"]), "lambda": fit.get("lambda"),
                  "n_references": len(fit["y_ref"]), "irt": irt(fit),
                  "calibration": calibration(fit),
                  **({"design": design_summary(fit["design"])} if fit.get("design") else {}),
                  **({"selector": fit["selector"], "predictor": fit.get("predictor"),
                      "components": list(fit.get("components") or [])} if fit.get("selector") else {})}
            for bid, fit in fits.items()}


def design_summary(state: dict[str, Any]) -> dict[str, Any]:
    """A design coreset's strata as users read them: per stratum its size ``N_h``, items drawn ``n_h`` and whether
    it is the method's take-all stratum (``diagnostics.fits_summary[b].design``)."""
    strata = np.asarray(state["item_strata"], dtype=np.int64)
    sizes = np.bincount(strata)
    drawn = np.bincount(strata[np.asarray(state["items"], dtype=np.int64)], minlength=sizes.size)
    take_all = int(state.get("method_items", 0)) > 0
    return {"method_items": int(state.get("method_items", 0)),
            "strata": [{"size": int(sizes[h]), "drawn": int(drawn[h]),
                        "take_all": bool(take_all and h == sizes.size - 1)} for h in range(sizes.size)]}
