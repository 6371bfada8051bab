"""Prediction intervals and the extrapolation guard for coreset predictors (paper 002 §2.3, App. L.1).

Intervals (not in paper 002, which reports point predictions only) are calibrated on the
reference models by **leave-one-reference-model-out** (LOO) refits: for each reference i the
predictor is refitted on the other M-1 references and its LOO residual ``R_i = |y_i - mu_{-i}(x_i)|``
recorded (the refit includes the predictor's own lambda selection, so the calibration is honest).

* ``method="split"``: ``mu(x) +- q`` with ``mu`` fitted on all M references and ``q`` the
  ``ceil((M+1) level)``-th smallest ``R_i`` (the empirical quantile at ``ceil((M+1) level)/M``,
  the split-conformal finite-sample correction); ``q = inf`` when that rank exceeds M. Strictly
  this is the jackknife interval with the conformal rank; its coverage is close to nominal for
  stable predictors but not guaranteed.
* ``method="jackknife+"`` (Barber, Candes, Ramdas & Tibshirani 2021, Ann. Statist.):
  ``[ q^-_{alpha}{mu_{-i}(x) - R_i},  q^+_{alpha}{mu_{-i}(x) + R_i} ]`` where ``q^-`` is the
  ``floor(alpha (M+1))``-th smallest value and ``q^+`` the ``ceil((1-alpha)(M+1))``-th smallest,
  ``alpha = 1 - level``; guaranteed coverage >= ``1 - 2 alpha`` for exchangeable models.
  Out-of-range ranks give infinite ends.

Both assume the target is exchangeable with the references; out of distribution (see
:func:`extrapolation_flag`) they have no guarantee.

Interval rules for errors computed elsewhere (:data:`INTERVAL_RULES`, :func:`interval_from_errors`,
issue 16 §2; docs/DECISIONS.md "Score-based intervals"):

* ``"conformal"`` (the rule before issue 16): ``center +- q``, ``q`` the ``ceil((M+1) level)``-th
  smallest ``|e_i|`` of the references' cross-fitted errors (selection refitted per fold).
* ``"calibrated"`` (the default when the fixed-coreset errors are known): ``center +- s_level *
  sigma`` with the scale ``sigma = sqrt(RMS(cross-fitted) * RMS(fixed))`` -- the geometric mean of
  the pessimistic cross-fitted error scale (re-selecting in each fold, with the references'
  spread, overstates the final coreset's held-out error: MuSR mRMR++ RMS 2.60 vs 2.09 held out) and
  the optimistic leave-one-reference-out scale on the fixed, chosen coreset (no account of the
  selection: 1.83) -- and the shape ``s_level`` the conformal quantile (rank
  ``ceil((2M+1) level)``) of the 2M standardised errors ``e_i / RMS`` of both sets pooled, so
  that a 95% interval with 30 references is not the largest single error. See
  :func:`calibrated_half_width`.

Top-decile widening (issue 25 §3; :func:`top_widened_interval`): a target whose prediction lies in the top
:data:`TOP_SHARE` of the references' held-out predictions gets ``max(h, h_top)``, where ``h_top`` is the same
rule on the errors of the :data:`TOP_SHARE` (at least :data:`TOP_MIN`, and enough for a finite rank at the
level) references with the highest held-out
predictions: a predictor regresses the best models toward the mean, so their errors are larger than the
average reference's, and an interval sized on all references under-covers them. It only widens.

Shrinkage extension (issue 35 item 1; :func:`shrinkage_extended_interval`, rule ``"extended"``, the default): a
regression on the coreset pulls every target toward the references' mean, so a model better than every
reference is predicted too low by more than the references' errors say, whatever its coreset scores (the best
held-out models of MuSR are not even in the references' top decile of coreset means). The references show by how
much: their held-out predictions ``p_i = y_i - e_i`` regressed on their truths ``y_i`` have a slope ``b < 1``.
Inverting that line (the classical calibration estimator, Eisenhart 1939; Osborne 1991, *Int. Stat. Rev.* 59)
gives ``y* = (center - a) / b``, unbiased given the truth where the regression estimate is not, and the
interval is extended from ``[lower, upper]`` to also hold ``[lower, upper] + (y* - center)``: no change for a
target near the references' mean (``y* ~ center``), one-sided widening toward the extreme for one far from it.
The point estimate stays the regression's (its RMSE is the better one).

Extrapolation guard (issue rule): a target whose coreset mean is below the lowest or above the
highest reference coreset mean is flagged ``extrapolation=True`` (:func:`extrapolation_flags`);
:func:`guarded_predictor` then picks :class:`~evalplan.core.coresets.predictors.AIPWPredictor` (002 App. L.1)
unless the caller chose a predictor explicitly. This one rule serves ``POST /v1/coresets/{id}/predict``,
the backtests' ``guard`` predictor and :func:`guarded_predict`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from evalplan.core.coresets.predictors import PREDICTOR_CLASSES

__all__ = [
    "DEFAULT_INTERVAL",
    "INTERVAL_RULES",
    "ConformalInterval",
    "calibrated_half_width",
    "conformal_half_width",
    "fixed_coreset_errors",
    "coreset_cross_fitted_errors",
    "cross_fitted_errors",
    "interval_from_errors",
    "pooled_errors",
    "extrapolation_flag",
    "extrapolation_flags",
    "guarded_predict",
    "guarded_predictor",
    "jackknife_plus_bounds",
    "loo_conformal_interval",
    "top_widened_interval",
    "shrinkage_extended_interval",
    "base_rule",
]

Method = Literal["split", "jackknife+"]
INTERVAL_RULES: tuple[str, ...] = ("extended", "calibrated", "conformal")
DEFAULT_INTERVAL = "extended"
EXTENDED = "extended"  # "calibrated" + :func:`shrinkage_extended_interval` (issue 35 item 1)
GUARD_IN_RANGE = "kernel_ridge"  # the guard's predictor for a target inside the references' range
GUARD_EXTRAPOLATED = "aipw"  # ... and for a flagged one


@dataclass(frozen=True)
class ConformalInterval:
    """Point prediction(s) with interval(s); arrays of shape (T,) (T = number of targets)."""

    center: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float
    method: str
    loo_residuals: np.ndarray  # (M,) |y_i - mu_{-i}(x_i)|
    loo_errors: np.ndarray | None = None  # (M,) signed y_i - mu_{-i}(x_i), for pooled_interval


def _kth_smallest(a: np.ndarray, rank: int, axis: int = 0) -> np.ndarray:
    """``rank``-th smallest (1-based) along ``axis``; -inf for rank < 1, +inf for rank > n."""
    n = a.shape[axis]
    shape = list(a.shape)
    del shape[axis]
    if rank < 1:
        return np.full(shape, -np.inf)
    if rank > n:
        return np.full(shape, np.inf)
    return np.asarray(np.sort(a, axis=axis).take(rank - 1, axis=axis))


def jackknife_plus_bounds(
    loo_pred_target: np.ndarray, loo_residuals: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """Jackknife+ bounds (Barber et al. 2021, eq. 6) from LOO target predictions.

    loo_pred_target : (M,) or (M, T) ``mu_{-i}(x_target)``; loo_residuals : (M,) ``R_i``.
    Lower = ``floor(alpha (M+1))``-th smallest of ``mu_{-i} - R_i``; upper =
    ``ceil((1 - alpha)(M+1))``-th smallest of ``mu_{-i} + R_i``; ``alpha = 1 - level``.
    """
    mu = np.asarray(loo_pred_target, dtype=float)
    R = np.asarray(loo_residuals, dtype=float)
    if mu.ndim == 1:
        mu = mu[:, None]
    M = mu.shape[0]
    alpha = 1.0 - level
    lo_rank = math.floor(alpha * (M + 1) + 1e-9)
    hi_rank = math.ceil((1.0 - alpha) * (M + 1) - 1e-9)
    lower = _kth_smallest(mu - R[:, None], lo_rank)
    upper = _kth_smallest(mu + R[:, None], hi_rank)
    return lower, upper


def loo_conformal_interval(
    predictor_factory: Callable[[], Any],
    X_ref: np.ndarray,
    y_ref: np.ndarray,
    x_target: np.ndarray,
    level: float = 0.95,
    method: Method = "split",
) -> ConformalInterval:
    """Interval at ``level`` from leave-one-reference-model-out residuals (see module docstring).

    predictor_factory : zero-argument callable returning a fresh unfitted predictor
        (``fit(X, y) -> self``, ``predict(X) -> (T,)``), e.g. ``KernelRidgePredictor``.
    x_target : (k,) or (T, k) coreset scores of the target model(s).
    """
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    if method not in ("split", "jackknife+"):
        raise ValueError(f"unknown method {method!r}")
    X = np.asarray(X_ref, dtype=float)
    y = np.asarray(y_ref, dtype=float).ravel()
    Xt = np.asarray(x_target, dtype=float)
    if Xt.ndim == 1:
        Xt = Xt[None, :]
    M = X.shape[0]
    if M < 2:
        raise ValueError("need at least 2 reference models")
    center = np.asarray(predictor_factory().fit(X, y).predict(Xt), dtype=float)
    E = np.empty(M)
    loo_t = np.empty((M, Xt.shape[0]))
    mask = np.ones(M, dtype=bool)
    for i in range(M):
        mask[i] = False
        p = predictor_factory().fit(X[mask], y[mask])
        E[i] = y[i] - float(p.predict(X[i : i + 1])[0])
        if method == "jackknife+":
            loo_t[i] = p.predict(Xt)
        mask[i] = True
    R = np.abs(E)
    if method == "split":
        q = float(_kth_smallest(R, math.ceil((M + 1) * level - 1e-9)))
        lower, upper = center - q, center + q
    else:
        lower, upper = jackknife_plus_bounds(loo_t, R, level)
    return ConformalInterval(center, lower, upper, float(level), method, R, E)


def conformal_half_width(errors: np.ndarray, level: float) -> float:
    """The ``ceil((M+1) level)``-th smallest ``|errors|`` (+inf past M): the split-conformal rank."""
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    R = np.abs(np.asarray(errors, dtype=float).ravel())
    return float(_kth_smallest(R, math.ceil((R.size + 1) * level - 1e-9)))


def _rms(e: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(e)))) if e.size else 0.0


def calibrated_half_width(errors: np.ndarray, fixed_errors: np.ndarray, level: float) -> float:
    """Half-width of the ``"calibrated"`` rule (module docstring; issue 16 §2).

    errors : (M,) cross-fitted errors (selector + predictor refitted per fold: pessimistic).
    fixed_errors : (M',) leave-one-reference-out errors of the predictor on the chosen coreset
        (:func:`fixed_coreset_errors`: optimistic, the selection saw every reference).
    Returns ``s_level * sqrt(RMS(errors) * RMS(fixed_errors))`` where ``s_level`` is the
    ``ceil((n+1) level)``-th smallest of the n pooled standardised ``|e| / RMS`` (+inf past n).
    A set whose RMS is 0 contributes no shape and the scale is the other's RMS times the
    geometric-mean weight (0 if both are 0).
    """
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    a = np.asarray(errors, dtype=float).ravel()
    b = np.asarray(fixed_errors, dtype=float).ravel()
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    ra, rb = _rms(a), _rms(b)
    if a.size == 0 and b.size == 0:
        return math.inf
    sigma = math.sqrt(ra * rb) if a.size and b.size else max(ra, rb)
    shape = [x / r for x, r in ((a, ra), (b, rb)) if r > 0]
    if not shape or sigma == 0.0:
        return 0.0
    return conformal_half_width(np.concatenate(shape), level) * sigma


def interval_from_errors(center: np.ndarray | float, errors: np.ndarray, level: float,
                         fixed_errors: np.ndarray | None = None, rule: str | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
    """``center +- h`` from errors computed elsewhere (cross-fitted errors that include the coreset
    selection, or :func:`pooled_errors` of several benchmarks).

    rule : ``"conformal"`` -- ``h`` = :func:`conformal_half_width` of ``errors`` (the rule before
        issue 16, also used whatever ``rule`` says when ``fixed_errors`` is None); ``"calibrated"``
        -- :func:`calibrated_half_width` of ``errors`` and ``fixed_errors``. None =
        :data:`DEFAULT_INTERVAL`.
    """
    rule = base_rule(rule)
    if rule == "calibrated" and fixed_errors is not None:
        q = calibrated_half_width(errors, fixed_errors, level)
    else:
        q = conformal_half_width(errors, level)
    c = np.asarray(center, dtype=float)
    return c - q, c + q


def base_rule(rule: str | None) -> str:
    """The half-width rule behind ``rule`` (None = :data:`DEFAULT_INTERVAL`): ``"extended"`` sizes its interval by
    ``"calibrated"`` and then extends it (:func:`shrinkage_extended_interval`); ValueError for an unknown rule."""
    rule = DEFAULT_INTERVAL if rule is None else rule
    if rule not in INTERVAL_RULES:
        raise ValueError(f"unknown interval rule {rule!r}; choose among {INTERVAL_RULES}")
    return "calibrated" if rule == EXTENDED else rule


SLOPE_MIN = 0.2  # the shrinkage slope is clipped to [SLOPE_MIN, 1]: a worse predictor extends at most 1 / SLOPE_MIN


@dataclass(frozen=True)
class Extension:
    """What :func:`shrinkage_extended_interval` did: the references' shrinkage line ``p = a + b y`` of held-out
    predictions on truths, and per target the classical calibration estimate ``y*`` and the shift ``y* - center``."""

    lower: np.ndarray
    upper: np.ndarray
    deshrunk: np.ndarray
    shift: np.ndarray
    slope: float
    intercept: float


def shrinkage_extended_interval(center: np.ndarray | float, lower: np.ndarray | float, upper: np.ndarray | float,
                                errors: np.ndarray, reference_truth: np.ndarray) -> Extension:
    """Extend ``[lower, upper]`` around ``center`` toward the classical calibration estimate (module docstring):
    ``b`` = least-squares slope of the references' held-out predictions ``reference_truth - errors`` on
    ``reference_truth`` (clipped to ``[SLOPE_MIN, 1]``), ``a`` = the intercept through the means, ``y* =
    (center - a) / b``; the interval becomes ``[min(lower, lower + s), max(upper, upper + s)]``, ``s = y* -
    center``. Nothing changes (``s = 0``) where the lengths differ, fewer than 3 references are given or their
    truths do not vary."""
    c = np.asarray(center, dtype=float)
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    e = np.asarray(errors, dtype=float).ravel()
    y = np.asarray(reference_truth, dtype=float).ravel()
    ok = e.size == y.size and e.size >= 3 and np.isfinite(e).all() and np.isfinite(y).all() and float(np.var(y)) > 0
    if not ok:
        return Extension(lo, hi, c, np.zeros(c.shape), 1.0, 0.0)
    p = y - e
    slope = float(np.cov(y, p, bias=True)[0, 1] / np.var(y))
    b = min(max(slope, SLOPE_MIN), 1.0)
    a = float(p.mean() - b * y.mean())
    deshrunk = (c - a) / b
    shift = deshrunk - c
    return Extension(np.minimum(lo, lo + shift), np.maximum(hi, hi + shift), deshrunk, shift, b, a)


TOP_SHARE = 0.1  # the references' top decile by held-out prediction
TOP_MIN = 10  # references the top group keeps at least (more where the level needs them for a finite rank)


def top_widened_interval(center: np.ndarray | float, errors: np.ndarray, level: float,
                         fixed_errors: np.ndarray | None, rule: str | None, reference_truth: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`interval_from_errors` with the top-decile widening (module docstring): ``(lower, upper, top)``,
    ``top`` the targets whose ``center`` is at or above the references' 90th percentile of held-out
    predictions ``reference_truth - errors``. ``errors`` and ``fixed_errors`` are per reference, in the order of
    ``reference_truth``; where their lengths differ the rule is applied without widening."""
    c = np.asarray(center, dtype=float)
    lo, hi = interval_from_errors(c, errors, level, fixed_errors, rule)
    e = np.asarray(errors, dtype=float).ravel()
    truth = np.asarray(reference_truth, dtype=float).ravel()
    fixed = None if fixed_errors is None else np.asarray(fixed_errors, dtype=float).ravel()
    if e.size != truth.size or (fixed is not None and fixed.size != e.size) or e.size < 2:
        return lo, hi, np.zeros(c.shape, dtype=bool)
    held_out = truth - e
    # enough references for a finite conformal rank at this level (ceil((m + 1) level) <= m)
    size = max(TOP_MIN, math.ceil(level / (1.0 - level) - 1e-9), math.ceil(TOP_SHARE * e.size))
    top = np.argsort(-held_out, kind="stable")[:size]
    t_lo, t_hi = interval_from_errors(0.0, e[top], level, None if fixed is None else fixed[top], rule)
    h_top = float(t_hi - t_lo) / 2.0
    in_top = c >= float(np.quantile(held_out, 1.0 - TOP_SHARE))
    h = (hi - lo) / 2.0
    widened = np.where(in_top, np.maximum(h, h_top), h)
    return c - widened, c + widened, np.asarray(in_top, dtype=bool)


def fixed_coreset_errors(predictor_factory: Callable[[], Any], X_ref: np.ndarray, y_ref: np.ndarray
                         ) -> np.ndarray:
    """(M,) signed leave-one-reference-out errors ``y_i - mu_{-i}(x_i)`` of the predictor on the
    chosen coreset's scores ``X_ref`` (selection not refitted): the optimistic half of the
    ``"calibrated"`` rule. Above :data:`FIXED_MAX_REFITS` references, leave-one-fold-out on that many folds."""
    X = np.asarray(X_ref, dtype=float)
    y = np.asarray(y_ref, dtype=float).ravel()
    M = y.size
    if M < 2:
        raise ValueError("need at least 2 reference models")
    E = np.empty(M)
    if M > FIXED_MAX_REFITS:  # leave-one-fold-out: with M refits of an O(M^3) fit each, 426 references took minutes
        for test in np.array_split(np.random.default_rng(104729).permutation(M), FIXED_MAX_REFITS):
            mask = np.ones(M, dtype=bool)
            mask[test] = False
            E[test] = y[test] - np.asarray(predictor_factory().fit(X[mask], y[mask]).predict(X[test]), dtype=float)
        return E
    mask = np.ones(M, dtype=bool)
    for i in range(M):
        mask[i] = False
        E[i] = y[i] - float(np.asarray(predictor_factory().fit(X[mask], y[mask]).predict(X[i : i + 1]))[0])
        mask[i] = True
    return E


#: above this many references :func:`fixed_coreset_errors` leaves out one of this many folds at a time
#: (each training set keeps >= 98% of the references, so the errors are leave-one-out's to within noise)
FIXED_MAX_REFITS = 50


def cross_fitted_errors(fit_predict: Callable[[np.ndarray, np.ndarray], np.ndarray], y_ref: np.ndarray,
                        n_folds: int = 10, seed: int = 0) -> np.ndarray:
    """(M,) signed held-out errors ``y_i - f_{-fold(i)}(i)`` of a whole coreset pipeline.

    ``fit_predict(train, test)`` refits everything that saw the references -- the coreset
    *selection* included -- on the reference indices ``train`` and returns its predictions for
    ``test``. The references are split into ``min(n_folds, M)`` seeded folds. Why: the selectors
    of 002 (mRMR relevance, Search+'s cross-validation, the k-medoids of AnchorPoints) choose the
    coreset on the same references that leave-one-out refits of the *predictor alone* would use
    for calibration, so those residuals are optimistic (held-out coverage of a 90% interval
    0.70-0.85 for Search+ and mRMR on OpenLLM-v2, docs/RESULTS.md); cross-fitting the selection
    is the CV+ recipe of Barber et al. (2021) applied to the full algorithm. Feed the errors to
    :func:`interval_from_errors` (or :func:`pooled_errors` first, for an aggregate).
    """
    y = np.asarray(y_ref, dtype=float).ravel()
    M = y.size
    if M < 2:
        raise ValueError("need at least 2 reference models")
    K = max(2, min(int(n_folds), M))
    perm = np.random.default_rng([int(seed), 104729]).permutation(M)
    errors = np.full(M, np.nan)
    for test in np.array_split(perm, K):
        train = np.setdiff1d(perm, test)
        pred = np.asarray(fit_predict(np.sort(train), np.sort(test)), dtype=float).ravel()
        if pred.shape != (test.size,):
            raise ValueError("fit_predict must return one prediction per test reference")
        errors[np.sort(test)] = y[np.sort(test)] - pred
    return errors


def coreset_cross_fitted_errors(
    select: Callable[[np.ndarray], tuple[np.ndarray, Any]],
    predictor_for: Callable[[Any], Callable[[], Any]],
    Y_ref: np.ndarray,
    y_ref: np.ndarray,
    n_folds: int = 10,
    seed: int = 0,
    cache: dict[tuple[int, ...], tuple[np.ndarray, Any]] | None = None,
) -> np.ndarray:
    """:func:`cross_fitted_errors` of a coreset pipeline on the references' score matrix ``Y_ref``.

    On each fold's training references, ``select(Y_train) -> (item indices, weights)`` chooses
    the coreset and ``predictor_for(weights)`` gives the predictor factory, which is fitted on their
    coreset scores -> ``y_ref``. ``cache`` (keyed by the training references) lets several
    predictors of one selector share each fold's selection.
    """
    Y = np.asarray(Y_ref, dtype=float)
    y = np.asarray(y_ref, dtype=float).ravel()

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        key = tuple(train.tolist())
        if cache is not None and key in cache:
            idx, weights = cache[key]
        else:
            idx, weights = select(Y[train])
            idx = np.asarray(idx, dtype=np.int64)
            if cache is not None:
                cache[key] = (idx, weights)
        model = predictor_for(weights)().fit(Y[train][:, idx], y[train])
        return np.asarray(model.predict(Y[test][:, idx]))

    return cross_fitted_errors(fit_predict, y, n_folds=n_folds, seed=seed)


def pooled_errors(errors: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """(M,) calibration errors of a mean of several benchmark estimates.

    ``errors`` is (B, M): benchmark b's signed held-out error on reference i (the same M
    references for every benchmark). The aggregate ``sum_b w_b est_b`` (weights default 1/B) has
    held-out error ``sum_b w_b errors[b, i]`` on reference i, so an interval for the aggregate is
    :func:`interval_from_errors` on these pooled errors: the same conformal rule as one benchmark,
    errors that cancel across benchmarks included, instead of a conservative Bonferroni union.
    """
    E = np.asarray(errors, dtype=float)
    if E.ndim != 2 or E.shape[0] < 1:
        raise ValueError("errors must be (benchmarks x references)")
    w = np.full(E.shape[0], 1.0 / E.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (E.shape[0],):
        raise ValueError("one weight per benchmark")
    return np.asarray(w @ E)


def extrapolation_flags(target_coreset_means: Any, ref_coreset_means: Any, tolerance: float = 0.0) -> np.ndarray:
    """The extrapolation guard's test, per target: is its coreset mean outside
    ``[min - tolerance, max + tolerance]`` of the references' coreset means? (Every target is
    flagged when there are no references.)"""
    x = np.asarray(target_coreset_means, dtype=float)
    m = np.asarray(ref_coreset_means, dtype=float).ravel()
    if m.size == 0:
        return np.ones(x.shape, dtype=bool)
    return np.asarray((x < m.min() - tolerance) | (x > m.max() + tolerance), dtype=bool)


def extrapolation_flag(x_target_coreset_mean: float, X_ref_coreset_means: np.ndarray, tolerance: float = 0.0) -> bool:
    """True when the target's coreset mean lies outside [min, max] of the references' coreset means."""
    return bool(extrapolation_flags(float(x_target_coreset_mean), X_ref_coreset_means, tolerance))


def guarded_predictor(flagged: bool, predictor: str = GUARD_IN_RANGE, explicit: bool = False) -> str:
    """The extrapolation guard's choice for one target: :data:`GUARD_EXTRAPOLATED` (AIPW, 002
    App. L.1) when it is flagged, unless the caller chose ``predictor`` explicitly; else ``predictor``."""
    return GUARD_EXTRAPOLATED if flagged and not explicit else predictor


def guarded_predict(
    X_ref: np.ndarray,
    y_ref: np.ndarray,
    X_target: np.ndarray,
    predictor_factory: Callable[[], Any] | None = None,
    level: float = 0.95,
    method: Method = "split",
) -> list[dict[str, Any]]:
    """Predict each target with an interval and the extrapolation guard.

    Default predictor: :class:`KernelRidgePredictor` in range, :class:`AIPWPredictor` for
    flagged targets; an explicit ``predictor_factory`` is used for every target.
    Returns one dict per target: prediction, lower, upper, level, extrapolation, predictor.
    """
    X = np.asarray(X_ref, dtype=float)
    Xt = np.asarray(X_target, dtype=float)
    if Xt.ndim == 1:
        Xt = Xt[None, :]
    ref_means = X.mean(axis=1)
    out = []
    for x in Xt:
        extrap = extrapolation_flag(float(x.mean()), ref_means)
        factory = predictor_factory or PREDICTOR_CLASSES[guarded_predictor(extrap)]
        ci = loo_conformal_interval(factory, X, y_ref, x, level=level, method=method)
        out.append(
            {
                "prediction": float(ci.center[0]),
                "lower": float(ci.lower[0]),
                "upper": float(ci.upper[0]),
                "level": float(level),
                "extrapolation": extrap,
                "predictor": getattr(factory, "__name__", type(factory).__name__),
            }
        )
    return out
