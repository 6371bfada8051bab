"""Variance calibration of a sequential estimator from its own reference set (docs/SEQUENTIAL.md,
"Variance calibrated on the references"; ``RefGPEstimator(variance="calibrated")``, the presets ``refgp_v3``
and ``refgp_cal``).

A model-based posterior variance of the benchmark mean is only as honest as the model: with learned
hyperparameters and an item selection that seeks the uncertain items, it is often far too small
(docs/RESULTS.md, "Sequential sessions"). This module measures how much too small on the references
themselves, before any target score is seen:

* ``H`` references are held out as pseudo-targets (the best ``ceil(H / 4)`` by mean, so that a target
  above the remaining references is represented, and the rest drawn at random with a fixed seed); a
  prior is built from the other references;
* a benchmark of more than ``MAX_ITEMS`` items is calibrated on a seeded uniform subset of that many
  items (the pseudo-targets' truth is their mean there), which bounds the cost whatever N is;
* each pseudo-target is replayed as a session of the *uncalibrated* estimator for ``n_steps`` items
  (its own selection, its true scores), recording the standardized error
  ``z_h(n) = (estimate_n - truth_h) / sd_n`` after every item;
* the inflation factor at ``n`` is the ``level`` quantile of ``|z|`` over the pseudo-targets and the
  window ``[n / WINDOW, n * WINDOW]``, divided by the normal quantile: ``c(n) = q(|z|) / z_level``,
  floored at 1 (the calibration never narrows the model's interval). Beyond ``n_steps`` the last value
  holds.

The selection of these estimators does not depend on the variance's scale, so the calibrated session
proposes exactly the items the uncalibrated one would: only the reported variance is ``c(n)^2``
times the model's. The curve is computed once per (prior, parameter set, settings, process) and cached
with the prior (``base.derived``): its cost is one prior build over ``M - H`` references and ``H`` replays of
``n_steps`` items (about ``H`` sessions' worth of work), paid by the first session of a reference set.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .base import derived, store_derived, z_of
from .config import SessionConfig
from .prior import BucketPrior

N_PSEUDO = 8  # pseudo-targets (held-out references)
N_STEPS = 300  # items replayed per pseudo-target
WINDOW = 1.25  # c(n) pools the standardized errors of n / WINDOW .. n * WINDOW
MIN_REFERENCES = 5  # fewer references: no calibration (c = 1)
MAX_ITEMS = 1500  # larger benchmarks are calibrated on a seeded uniform subset of this many items

Factory = Callable[[BucketPrior, SessionConfig], Any]


def held_out(means: np.ndarray, n_pseudo: int, seed: int) -> np.ndarray:
    """Indices of the pseudo-targets: the best ``ceil(H / 4)`` references by mean, the rest at random."""
    M = means.shape[0]
    H = min(n_pseudo, M // 3)
    order = np.argsort(-means, kind="stable")
    n_top = max(1, math.ceil(H / 4))
    top = order[:n_top]
    rng = np.random.default_rng([seed, 11])
    rest = rng.choice(order[n_top:], size=H - n_top, replace=False) if H > n_top else np.array([], dtype=np.int64)
    return np.sort(np.concatenate([top, rest]).astype(np.int64))


def standardized_errors(prior: BucketPrior, make: Factory, method: str, *, n_pseudo: int = N_PSEUDO,
                        n_steps: int = N_STEPS, seed: int = 0, max_items: int = MAX_ITEMS) -> np.ndarray:
    """``(H, n_steps)`` standardized errors ``(estimate - truth) / sd`` of replayed pseudo-targets (NaN
    where the variance is 0 or the replay ended); ``(0, 0)`` with fewer than ``MIN_REFERENCES``."""
    R = prior.bucket_vectors[prior.bucket_of_item].T  # (M, N): the reference scores
    M, N = R.shape
    if M < MIN_REFERENCES or N < 3:
        return np.zeros((0, 0))
    if N > max_items:
        R = R[:, np.sort(np.random.default_rng([seed, 13]).choice(N, size=max_items, replace=False))]
        N = max_items
    means = R.mean(axis=1)
    held = held_out(means, n_pseudo, seed)
    keep = np.setdiff1d(np.arange(M), held)
    cal_prior = BucketPrior.from_reference_scores(R[keep])
    steps = min(n_steps, N - 1)
    Z = np.full((held.shape[0], steps), np.nan)
    config = SessionConfig(method=method, seed=seed, stop={"half_width": 0.0, "level": 0.95, "min_items": 1})
    for k, h in enumerate(held):
        est = make(cal_prior, config)
        truth = float(means[h])
        for t in range(steps):
            items = est.propose()
            if not items:
                break
            est.observe(items[0], float(R[h, items[0]]))
            sd = math.sqrt(max(est.variance, 0.0))
            if sd > 0:
                Z[k, t] = (est.estimate - truth) / sd
    return Z


def inflation_curve(Z: np.ndarray, level: float = 0.95, window: float = WINDOW) -> np.ndarray:
    """``c(n)`` for n = 1..steps from standardized errors (the module docstring); ``[1.0]`` if none."""
    if Z.size == 0:
        return np.ones(1)
    steps = Z.shape[1]
    z = z_of(level)
    c = np.ones(steps)
    A = np.abs(Z)
    for t in range(steps):
        n = t + 1
        a, b = max(1, int(math.floor(n / window))), min(steps, int(math.ceil(n * window)))
        vals = A[:, a - 1:b]
        vals = vals[np.isfinite(vals)]
        if vals.size:
            c[t] = max(1.0, float(np.quantile(vals, level)) / z)
    return c


def calibration(prior: BucketPrior, make: Factory, method: str, *, level: float = 0.95,
                n_pseudo: int = N_PSEUDO, n_steps: int = N_STEPS, seed: int = 0, tag: str | None = None) -> np.ndarray:
    """The cached ``c(n)`` curve of the estimators ``make`` builds on ``prior`` (computed on first use; the
    replays' config has ``method``). The cache key is ``calibration:{tag}:{level}:{n_pseudo}:{n_steps}:{seed}``,
    ``tag`` (default: ``method``) naming the uncalibrated estimator: one curve per parameter set."""
    key = f"calibration:{tag or method}:{level}:{n_pseudo}:{n_steps}:{seed}"
    cached = derived(prior, key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    Z = standardized_errors(prior, make, method, n_pseudo=n_pseudo, n_steps=n_steps, seed=seed)
    return store_derived(prior, key, inflation_curve(Z, level))  # type: ignore[no-any-return]


def factor_at(curve: np.ndarray, n: int) -> float:
    """``c(n)`` (the last value beyond the curve; 1 before the first observation)."""
    if n < 1 or curve.size == 0:
        return 1.0
    return float(curve[min(n, curve.size) - 1])

