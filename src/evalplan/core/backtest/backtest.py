"""Offline backtest of score-based coresets + predictors on a full score matrix (paper 002 §3, App. L.1).

Pure numpy / scipy / scikit-learn; no database.

Protocol (one *trial* = one seed)
---------------------------------
1. ``Y`` (models x items) is the full matrix. Missing scores (NaN) are imputed by the **item mean
   over all models** (computed once, before any split; an all-missing item is dropped). The
   full-benchmark score of a model is its mean over all (imputed) items, ``s = Y.mean(axis=1)``.
2. The models are split into ``n_reference`` reference (source) models and test models:

   * ``"random"``: references uniformly at random, test = all others.
   * ``"stratified"`` (002 §3): ten equal-width bins over ``[min s, max s]``; references are drawn
     round-robin over the non-empty bins (bins visited in a random order each round, one model
     uniformly from each bin per round, without replacement) so every score range is equally
     represented; test = all other models.
   * ``"extrapolation"`` (002 App. L.1): models ranked by ``s`` (stable sort); references drawn
     uniformly from the bottom 50%, test = the top 30% (so every reference scores at most every
     test model).

3. For each method and budget (fraction of items, ``k = max(1, round(budget * n_items))``) the
   selector is fitted on the references' rows only (seed = the trial seed); then for each of that
   method's predictors, the predictor is fitted on ``(Y_ref[:, coreset], s_ref)`` and predicts
   ``s`` of the test models from ``Y_test[:, coreset]``.
4. Metrics over the test models: RMSE, MAE (score units), Spearman rho, Kendall tau-b;
   ``coverage`` = fraction of test models inside the ``level`` interval ``prediction +- q``, ``q``
   the split-conformal quantile of the references' **cross-fitted** errors (ten folds; in each the
   selector *and* the predictor are refitted without the fold, as the service calibrates
   score-based coresets: :func:`evalplan.core.coresets.intervals.cross_fitted_errors`); the ``guard`` keeps
   leave-one-reference-out residuals of its two predictors on the chosen coreset; NaN for
   ``gp_irt`` / ``p_irt`` (refitting tinyBenchmarks' IRT pipeline per fold is out of the time budget);
   ``agreement`` = mean over the test models of the item-level Agreement of 003 App. C.1
   (:mod:`evalplan.core.coresets.item_predictions`; binary scores only, NaN for predictors without item-level
   predictions: ``mean``, ``aipw``, ``guard``);
   ``frac_flagged`` = fraction of test models outside the references' coreset-mean range
   (:func:`~evalplan.core.coresets.intervals.extrapolation_flag`); ``seconds`` = selection + predictor
   fit/predict wall time (not the interval calibration).
5. ``stability``: Nogueira et al. (2018) ``Phi_hat`` of the coresets chosen across the seeds for
   one (method, budget) (needs >= 2 seeds; NaN otherwise), repeated on each of its rows.

Methods (selectors): ``"random"`` (uniform random coreset), ``"irt"`` (:class:`IRTSelection`,
tinyBenchmarks IRT anchor points), and every key of :data:`SCORE_METHODS`. Predictors: ``mean``,
``weighted_mean`` (selector ``weights_``; uniform if it has none), ``ridge``, ``kernel_ridge``,
``aipw``, ``gp_irt``, ``p_irt`` (tinyBenchmarks' IRT model re-used from an ``irt`` selector, else
fitted on the references, :func:`evalplan.core.irt.irt.irt_predictor_for`) and ``guard``
(:func:`guarded_predict`'s rule: kernel ridge for in-range targets, AIPW for flagged ones).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy.stats import kendalltau, spearmanr

from evalplan.core.coresets.auto import auto_select
from evalplan.core.coresets.intervals import (
    base_rule,
    coreset_cross_fitted_errors,
    extrapolation_flags,
    fixed_coreset_errors,
    guarded_predictor,
    interval_from_errors,
    loo_conformal_interval,
)
from evalplan.core.coresets.item_predictions import (
    agreement_per_target,
    anchor_item_predictions,
    regression_item_predictions,
)
from evalplan.core.coresets.predictors import PREDICTOR_CLASSES, WeightedMeanPredictor
from evalplan.core.irt.irt import IRTSelection, irt_predictor_for
from evalplan.core.selection.score_based import SCORE_METHODS

__all__ = [
    "BACKTEST_METHODS", "BACKTEST_PREDICTORS", "DEFAULT_PREDICTOR", "SPLITS", "paper_label",
    "impute_item_mean", "split_models", "nogueira_stability", "regression_metrics", "run_backtest",
    "summarize", "markdown_table",
]

SPLITS = ("random", "stratified", "extrapolation")
BACKTEST_METHODS = ("random", "irt", *SCORE_METHODS, "auto")
BACKTEST_PREDICTORS = ("mean", "weighted_mean", "ridge", "kernel_ridge", "aipw", "gp_irt", "p_irt",
                       "guard", "auto")
DEFAULT_PREDICTOR = {"random": "mean", "anchor_points": "weighted_mean", "irt": "gp_irt", "auto": "auto"}
_NO_INTERVAL = ("gp_irt", "p_irt")

_LABELS = {
    ("random", "mean"): "Random", ("random", "ridge"): "Random+", ("random", "kernel_ridge"): "Random++",
    ("anchor_points", "weighted_mean"): "AnchorPoints", ("anchor_points", "kernel_ridge"): "AnchorPoints++",
    ("anchor_points", "ridge"): "AnchorPoints+", ("irt", "gp_irt"): "gp-IRT", ("irt", "p_irt"): "p-IRT",
    ("mrmr", "ridge"): "mRMR+", ("mrmr", "kernel_ridge"): "mRMR++", ("random_search", "ridge"): "Search+",
    ("random_search", "kernel_ridge"): "Search++", ("random", "aipw"): "AIPW", ("auto", "auto"): "auto",
}
_SHORT = {"anchor_points": "AnchorPoints", "random_search": "Search", "mrmr": "mRMR", "random": "Random",
          "irt": "IRT", "lasso": "Lasso", "hardness": "Hardness", "pbsc": "PBSC"}


def paper_label(method: str, predictor: str) -> str:
    """The 002 table name of a (selector, predictor) pair (``X+`` = ridge, ``X++`` = kernel ridge)."""
    if (method, predictor) in _LABELS:
        return _LABELS[(method, predictor)]
    base = _SHORT.get(method, method)
    suffix = {"ridge": "+", "kernel_ridge": "++"}.get(predictor, f" ({predictor})")
    return base + suffix


# ----------------------------------------------------------------------------- data and splits
def impute_item_mean(Y: Any) -> np.ndarray:
    """``Y`` as float64 with NaN replaced by its column (item) mean; all-NaN columns dropped."""
    Y = np.array(Y, dtype=np.float64)
    if Y.ndim != 2:
        raise ValueError(f"Y must be 2-D (models x items), got shape {Y.shape}")
    if np.isinf(Y).any():
        raise ValueError("Y must not contain infinities")
    keep = ~np.all(np.isnan(Y), axis=0)
    Y = Y[:, keep]
    if Y.shape[1] == 0:
        raise ValueError("Y has no item with an observed score")
    nan = np.isnan(Y)
    if nan.any():
        col = np.nanmean(Y, axis=0)
        Y[nan] = np.take(col, np.nonzero(nan)[1])
    return np.asarray(Y)


def split_models(s: np.ndarray, n_reference: int, split: str, rng: np.random.Generator,
                 n_bins: int = 10, ref_quantile: float = 0.5, test_quantile: float = 0.3
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``(ref_idx, test_idx)`` for full scores ``s`` (see the module docstring)."""
    s = np.asarray(s, dtype=float)
    M = s.size
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if split == "extrapolation":
        order = np.argsort(s, kind="stable")
        pool = order[: int(math.floor(ref_quantile * M))]
        test = order[M - int(math.ceil(test_quantile * M)):]
        if n_reference > pool.size or n_reference < 2:
            raise ValueError(f"n_reference={n_reference} must be in [2, {pool.size}] (bottom "
                             f"{ref_quantile:.0%} of {M} models) for the extrapolation split")
        ref = rng.choice(pool, size=n_reference, replace=False)
        return np.sort(ref), np.sort(test)
    if not 2 <= n_reference <= M - 1:
        raise ValueError(f"n_reference={n_reference} must be in [2, {M - 1}] for {M} models")
    if split == "random":
        ref = rng.choice(M, size=n_reference, replace=False)
    else:
        lo, hi = float(s.min()), float(s.max())
        if hi <= lo:
            bins = np.zeros(M, dtype=int)
        else:
            bins = np.minimum(((s - lo) / (hi - lo) * n_bins).astype(int), n_bins - 1)
        pools = [list(rng.permutation(np.flatnonzero(bins == b))) for b in range(n_bins)]
        ref_list: list[int] = []
        while len(ref_list) < n_reference:
            for b in rng.permutation(n_bins):
                if pools[b] and len(ref_list) < n_reference:
                    ref_list.append(int(pools[b].pop()))
        ref = np.asarray(ref_list)
    test = np.setdiff1d(np.arange(M), ref)
    return np.sort(ref), test


# ----------------------------------------------------------------------------- metrics
def regression_metrics(y_true: Any, y_pred: Any) -> dict[str, float]:
    """RMSE, MAE, Spearman rho and Kendall tau-b (NaN when a ranking is undefined)."""
    y = np.asarray(y_true, dtype=float)
    p = np.asarray(y_pred, dtype=float)
    err = p - y
    out = {"rmse": float(np.sqrt(np.mean(err**2))), "mae": float(np.mean(np.abs(err))),
           "spearman": math.nan, "kendall": math.nan}
    if y.size >= 2 and np.ptp(y) > 0 and np.ptp(p) > 0:
        out["spearman"] = float(spearmanr(y, p).statistic)
        out["kendall"] = float(kendalltau(y, p).statistic)
    return out


def nogueira_stability(selections: Sequence[Sequence[int]] | Sequence[np.ndarray], n_items: int) -> float:
    """Nogueira, Sechidis & Brown (2018) ``Phi_hat`` of L >= 2 subsets of ``range(n_items)``:
    ``1 - mean_i s_i^2 / (kbar/N (1 - kbar/N))`` with ``s_i^2 = L/(L-1) p_i (1 - p_i)``, ``p_i`` the
    selection frequency of item i and ``kbar`` the mean subset size. 1 = identical subsets, ~0 =
    random; NaN when L < 2 or the denominator is 0 (kbar in {0, N})."""
    L = len(selections)
    if L < 2:
        return math.nan
    Z = np.zeros((L, n_items))
    for l, sel in enumerate(selections):
        Z[l, np.asarray(sel, dtype=np.int64)] = 1.0
    p = Z.mean(axis=0)
    kbar = Z.sum(axis=1).mean()
    denom = (kbar / n_items) * (1.0 - kbar / n_items)
    if denom <= 0:
        return math.nan
    s2 = L / (L - 1) * p * (1.0 - p)
    return float(1.0 - s2.mean() / denom)


# ----------------------------------------------------------------------------- selection / prediction
def _select(method: str, Y_ref: np.ndarray, k: int, seed: int, params: Mapping[str, Any]
            ) -> tuple[np.ndarray, np.ndarray | None, Any]:
    if method == "random":
        rng = np.random.default_rng([seed, 7919])
        return np.sort(rng.choice(Y_ref.shape[1], size=k, replace=False)), None, None
    if method == "irt":
        sel = IRTSelection(k=k, seed=seed, **params).fit(Y_ref)
        return sel.ranking_, sel.weights_, sel
    if method == "auto":  # evalplan.core.coresets.auto: the nested-CV choice; its AutoResult is the "selector"
        res = auto_select(Y_ref, k, seed=seed, **params)
        return res.selection.idx, res.selection.weights, res
    if method not in SCORE_METHODS:
        raise ValueError(f"unknown method {method!r}; choose among {BACKTEST_METHODS}")
    sel = SCORE_METHODS[method](k=k, seed=seed, **params).fit(Y_ref)
    return sel.ranking_, getattr(sel, "weights_", None), sel


def _factory(name: str, weights: np.ndarray | None) -> Callable[[], Any]:
    if name == "weighted_mean":
        w = weights
        return lambda: WeightedMeanPredictor(np.ones(0) if w is None else w)
    if name in PREDICTOR_CLASSES:
        return PREDICTOR_CLASSES[name]
    raise ValueError(f"unknown predictor {name!r}; choose among {BACKTEST_PREDICTORS}")


def _coverage(lower: np.ndarray, upper: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((lower <= y) & (y <= upper)))


def _predict(name: str, Y_full_ref: np.ndarray, Xr: np.ndarray, yr: np.ndarray, Xt: np.ndarray,
             yt: np.ndarray, sel_idx: np.ndarray, weights: np.ndarray | None, selector: Any,
             flagged: np.ndarray, level: float, seed: int, intervals: bool
             ) -> tuple[np.ndarray, float, np.ndarray | None]:
    """(predictions on Xt, coverage, IRT item probabilities (T x N) or None) for predictor ``name``.

    ``coverage`` is computed here only for the ``guard`` (leave-one-reference-out residuals of its
    two predictors, ``intervals=True``); the others are calibrated by
    :func:`_selection_aware_errors`. The IRT predictors return the 2PL item curves they computed
    anyway, for :func:`_item_predictions`."""
    if name == "auto":  # the predictor auto chose and fitted on the references
        return np.asarray(selector.model.predict(Xt), dtype=float), math.nan, None
    if name in ("gp_irt", "p_irt"):
        pred = irt_predictor_for(Y_full_ref, sel_idx, weights=weights, selector=selector, seed=seed)
        est = pred.predict(Xt)
        return (est.gp_irt if name == "gp_irt" else est.p_irt), math.nan, pred.item_probabilities_
    if name == "guard":  # the service's extrapolation guard (evalplan.core.coresets.intervals.guarded_predictor)
        in_range, outside = (PREDICTOR_CLASSES[guarded_predictor(flag)] for flag in (False, True))
        out = in_range().fit(Xr, yr).predict(Xt)
        if flagged.any():
            out[flagged] = outside().fit(Xr, yr).predict(Xt[flagged])
        cov = math.nan
        if intervals:
            inside = np.zeros(yt.size, dtype=bool)
            for fac, mask in ((in_range, ~flagged), (outside, flagged)):
                if mask.any():
                    ci = loo_conformal_interval(fac, Xr, yr, Xt[mask], level=level)
                    inside[mask] = (ci.lower <= yt[mask]) & (yt[mask] <= ci.upper)
            cov = float(inside.mean())
        return out, cov, None
    if name == "weighted_mean" and weights is None:
        weights = np.full(Xr.shape[1], 1.0 / Xr.shape[1])
    return np.asarray(_factory(name, weights)().fit(Xr, yr).predict(Xt), dtype=float), math.nan, None


def _item_predictions(name: str, Y_full_ref: np.ndarray, Xr: np.ndarray, Xt: np.ndarray, selector: Any,
                      irt_items: np.ndarray | None) -> np.ndarray | None:
    """(T x N) item-level predictions of predictor ``name`` (:mod:`evalplan.core.coresets.item_predictions`), or
    None when it has none (mean, aipw, guard; weighted_mean without cluster labels)."""
    if name in ("gp_irt", "p_irt"):
        return irt_items
    if name in ("ridge", "kernel_ridge"):
        return regression_item_predictions(name, Xr, Y_full_ref, Xt)
    if name == "weighted_mean" and getattr(selector, "labels_", None) is not None:
        return anchor_item_predictions(selector.labels_, Xt)
    return None


def _selection_aware_errors(method: str, name: str, Y_ref: np.ndarray, s_ref: np.ndarray, k: int, seed: int,
                            params: Mapping[str, Any],
                            cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray | None]],
                            select: Callable[[np.ndarray, int, int], tuple[np.ndarray, Any, Any]] | None = None,
                            ) -> np.ndarray:
    """Held-out errors of (selector ``method`` -> predictor ``name``) on the references, the
    selection refitted on each of ten folds (:func:`evalplan.core.coresets.intervals.cross_fitted_errors`); one
    selection per fold is shared by the method's predictors through ``cache``; ``select(Y_train, k, seed)``
    replaces :func:`_select` (the planner's prefix cache)."""
    def select_fold(Y_train: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        if select is not None:
            idx, w, _ = select(Y_train, k, seed)
            return np.asarray(idx), w
        idx, w, _ = _select(method, Y_train, k, seed, params)
        return np.asarray(idx), w

    def predictor_for(w: np.ndarray | None) -> Callable[[], Any]:
        if name == "weighted_mean" and w is None:
            w = np.full(k, 1.0 / k)  # a selection has exactly k items
        return _factory(name, w)

    return coreset_cross_fitted_errors(select_fold, predictor_for, Y_ref, s_ref, n_folds=10, seed=seed, cache=cache)


def _fixed_errors(name: str, X_ref: np.ndarray, s_ref: np.ndarray, weights: np.ndarray | None,
                  rule: str | None) -> np.ndarray | None:
    """Leave-one-reference-out errors of predictor ``name`` on the chosen coreset's scores ``X_ref``
    (:func:`evalplan.core.coresets.intervals.fixed_coreset_errors`) when ``rule`` (None = the default) is
    ``"calibrated"``, else None (the ``"conformal"`` rule needs only the cross-fitted errors)."""
    if base_rule(rule) != "calibrated":  # "extended" sizes its interval by "calibrated"
        return None
    if name == "weighted_mean" and weights is None:
        weights = np.full(X_ref.shape[1], 1.0 / X_ref.shape[1])
    return fixed_coreset_errors(_factory(name, weights), X_ref, s_ref)


def run_backtest(
    Y: Any,
    methods: Sequence[str],
    predictors: Mapping[str, str | Sequence[str]] | None = None,
    budgets: Sequence[float] = (0.05, 0.1, 0.15),
    n_reference: int = 30,
    split: str = "stratified",
    seeds: int | Sequence[int] = 5,
    level: float = 0.95,
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    intervals: bool = True,
    interval_budgets: Sequence[float] | None = None,
    checkpoint: Callable[[], None] | None = None,
    interval: str | None = None,
) -> list[dict[str, Any]]:
    """Backtest selectors x predictors; one row per (method, predictor, budget, seed).

    Y : (models x items) full score matrix (NaN imputed by item mean, see module docstring).
    methods : selector names (:data:`BACKTEST_METHODS`).
    predictors : method -> predictor name or list of names (default :data:`DEFAULT_PREDICTOR`,
        else ``kernel_ridge``).
    budgets : coreset sizes as fractions of the items, in (0, 1].
    seeds : a count (seeds ``0..n-1``) or explicit seeds; each seed draws its own split.
    method_params : optional method -> extra selector constructor kwargs.
    intervals : compute interval coverage (cross-fitted: the selector and predictor refitted on
        ten folds of the references; see :func:`_selection_aware_errors`).
    interval_budgets : only these budgets get the coverage column (None = all); it is the
        costly part (ten selections per row).
    checkpoint : called before each selection and each prediction; it raises to stop the run
        (cooperative cancellation of a job).
    interval : the interval rule (:data:`evalplan.core.coresets.intervals.INTERVAL_RULES`; None = the default,
        ``"calibrated"``), as the service's predict applies it.

    Row keys: method, predictor, label, split, budget, k, seed, n_reference, n_test, rmse, mae,
    spearman, kendall, agreement, coverage, interval_width (mean width of the cross-fitted interval),
    frac_flagged, seconds, stability.
    """
    Y = impute_item_mean(Y)
    M, N = Y.shape
    s = Y.mean(axis=1)
    binary = bool(np.all((Y == 0.0) | (Y == 1.0)))
    seed_list = list(range(int(seeds))) if isinstance(seeds, (int, np.integer)) else [int(x) for x in seeds]
    if not seed_list:
        raise ValueError("need at least one seed")
    for b in budgets:
        if not 0.0 < float(b) <= 1.0:
            raise ValueError(f"budget must be a fraction in (0, 1], got {b!r}")
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    predictors = dict(predictors or {})
    method_params = dict(method_params or {})
    plan: dict[str, list[str]] = {}
    for m in methods:
        if m not in BACKTEST_METHODS:
            raise ValueError(f"unknown method {m!r}; choose among {BACKTEST_METHODS}")
        p = predictors.get(m, DEFAULT_PREDICTOR.get(m, "kernel_ridge"))
        plist = [p] if isinstance(p, str) else list(p)
        for name in plist:
            if name not in BACKTEST_PREDICTORS:
                raise ValueError(f"unknown predictor {name!r} for {m!r}; choose among {BACKTEST_PREDICTORS}")
            if (name == "auto") != (m == "auto"):
                raise ValueError("the auto predictor goes with the auto method only (it chooses its own predictor)")
        if any(n in ("gp_irt", "p_irt") for n in plist) or m == "irt":
            if np.any((Y < 0) | (Y > 1)):
                raise ValueError("irt / gp_irt / p_irt need scores in [0, 1]")
        plan[m] = plist

    rows: list[dict[str, Any]] = []
    chosen: dict[tuple[str, float], list[np.ndarray]] = {}
    for seed in seed_list:
        rng = np.random.default_rng(seed)
        ref, test = split_models(s, n_reference, split, rng)
        Y_ref, Y_test, s_ref, s_test = Y[ref], Y[test], s[ref], s[test]
        for budget in budgets:
            k = max(1, int(round(float(budget) * N)))
            for m, plist in plan.items():
                if checkpoint is not None:
                    checkpoint()
                t0 = time.perf_counter()
                idx, weights, selector = _select(m, Y_ref, k, seed, method_params.get(m, {}))
                t_sel = time.perf_counter() - t0
                chosen.setdefault((m, float(budget)), []).append(np.asarray(idx))
                Xr, Xt = Y_ref[:, idx], Y_test[:, idx]
                flagged = extrapolation_flags(Xt.mean(axis=1), Xr.mean(axis=1))
                cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray | None]] = {}
                with_ci = intervals and (interval_budgets is None or float(budget) in interval_budgets)
                for name in plist:
                    if checkpoint is not None:
                        checkpoint()
                    width = math.nan
                    t1 = time.perf_counter()
                    pred, cov, irt_items = _predict(name, Y_ref, Xr, s_ref, Xt, s_test, np.asarray(idx), weights,
                                                    selector, flagged, level, seed, False)
                    t_pred = time.perf_counter() - t1
                    if with_ci and name == "guard":
                        _, cov, _ = _predict(name, Y_ref, Xr, s_ref, Xt, s_test, np.asarray(idx), weights,
                                             selector, flagged, level, seed, True)
                    elif with_ci and name == "auto":  # auto's outer-fold errors (the choice refitted per fold)
                        fixed = selector.fixed_errors if base_rule(interval) == "calibrated" else None
                        lower, upper = interval_from_errors(pred, selector.outer_errors, level, fixed, interval)
                        cov = _coverage(lower, upper, s_test)
                        width = float(np.mean(upper - lower))
                    elif with_ci and name not in _NO_INTERVAL:
                        errors = _selection_aware_errors(m, name, Y_ref, s_ref, k, seed, method_params.get(m, {}),
                                                         cache)
                        fixed = _fixed_errors(name, Xr, s_ref, weights, interval)
                        lower, upper = interval_from_errors(pred, errors, level, fixed, interval)
                        cov = _coverage(lower, upper, s_test)
                        width = float(np.mean(upper - lower))
                    agree = math.nan
                    if binary:
                        item_pred = _item_predictions(name, Y_ref, Xr, Xt, selector, irt_items)
                        if item_pred is not None:
                            agree = float(np.mean(agreement_per_target(item_pred, Y_test, idx)))
                    rows.append({
                        "method": m, "predictor": name, "label": paper_label(m, name), "split": split,
                        "budget": float(budget), "k": k, "seed": seed, "n_reference": int(ref.size),
                        "n_test": int(test.size), **regression_metrics(s_test, pred), "coverage": cov,
                        "agreement": agree, "interval_width": width,
                        "frac_flagged": float(flagged.mean()), "seconds": t_sel + t_pred,
                        **({"auto_choice": selector.choice.label} if m == "auto" else {}),
                    })
    stab = {key: nogueira_stability(v, N) for key, v in chosen.items()}
    for r in rows:
        r["stability"] = stab[(r["method"], r["budget"])]
    return rows


# ----------------------------------------------------------------------------- reporting
METRICS = ("rmse", "mae", "spearman", "kendall", "agreement", "coverage", "stability", "seconds")


def summarize(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str] = METRICS) -> list[dict[str, Any]]:
    """Mean and standard error over seeds per (label, method, predictor, budget), first-seen order."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["label"], r["method"], r["predictor"], r["budget"]), []).append(r)
    out = []
    for (label, m, p, b), rs in groups.items():
        d: dict[str, Any] = {"label": label, "method": m, "predictor": p, "budget": b, "n_seeds": len(rs)}
        for key in metrics:
            v = np.array([r[key] for r in rs], dtype=float)
            v = v[np.isfinite(v)]
            d[key] = float(v.mean()) if v.size else math.nan
            d[key + "_se"] = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else math.nan
        out.append(d)
    return out


def _fmt(v: float, se: float | None, scale: float, digits: int) -> str:
    if not np.isfinite(v):
        return "n/a"
    txt = f"{v * scale:.{digits}f}"
    if se is not None and np.isfinite(se):
        txt += f" ± {se * scale:.{digits}f}"
    return txt


def markdown_table(summary: Sequence[Mapping[str, Any]], percent: bool = True, with_se: bool = True) -> str:
    """Markdown table of :func:`summarize` output (RMSE / MAE x100 when ``percent``)."""
    sc = 100.0 if percent else 1.0
    unit = " (x100)" if percent else ""
    head = (f"| method | predictor | budget | seeds | RMSE{unit} | MAE{unit} | Spearman | Kendall | "
            "Agreement | coverage | stability | seconds |")
    lines = [head, "|" + "---|" * 12]
    for d in summary:
        def g(key: str, scale: float = 1.0, digits: int = 3, d: Mapping[str, Any] = d) -> str:
            return _fmt(d[key], d[key + "_se"] if with_se else None, scale, digits)
        lines.append(f"| {d['label']} | {d['predictor']} | {d['budget']:g} | {d['n_seeds']} | "
                     f"{g('rmse', sc, 2)} | {g('mae', sc, 2)} | {g('spearman')} | {g('kendall')} | "
                     f"{_fmt(d.get('agreement', math.nan), None, 1, 3)} | {_fmt(d['coverage'], None, 1, 2)} | "
                     f"{_fmt(d['stability'], None, 1, 2)} | "
                     f"{_fmt(d['seconds'], None, 1, 2)} |")
    return "\n".join(lines)
