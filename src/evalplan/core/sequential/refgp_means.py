"""The logit-shift prior mean of :class:`~evalplan.core.sequential.refgp.RefGPEstimator` (``mean="logit_shift"``
and ``mean="evidence_mix"``; docs/SEQUENTIAL.md, the ``refgp`` family).

The prior mean of item ``i`` is ``mu_i(delta) = lo + (hi - lo) sigmoid(logit(u~_i) + delta)``: the references'
item mean ``u~_i`` (rescaled to [0, 1] by the reference score range and smoothed with ``SMOOTH``
pseudo-counts, so that items every reference solves or fails have finite logits) shifted by one ability
offset ``delta`` in logit space (a Rasch-like shift; ``delta = 0`` is the references' mean). ``delta`` is the
MAP of the fractional-response likelihood of the observed scores under ``N(0, delta_sd^2)``: ``delta_sd``
is ``DELTA_SD`` for ``logit_shift`` and read off the references (:func:`delta_scale`) for
``evidence_mix``. Per-prior values are cached with the prior (``base.derived``, under their historical keys).
"""

from __future__ import annotations

import numpy as np

from .base import derived, store_derived
from .prior import BucketPrior

DELTA_SD = 3.0  # prior sd of the logit shift (``mean="logit_shift"``)
SMOOTH = 0.5  # pseudo-count of the smoothed reference item mean (finite logits at 0 and 1)
DELTA_SPREAD = 1.5  # ``evidence_mix``: the shift's prior sd, x the sd of the references' own shifts
DELTA_SD_MIN = 0.1


def logit_means(prior: BucketPrior) -> tuple[np.ndarray, float, float]:
    """(logit of the smoothed, [0, 1]-rescaled reference item mean per bucket, lo, hi)."""
    cached = derived(prior, "refgp_v2_logits")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    V = prior.bucket_vectors
    lo, hi = float(V.min()), float(V.max())
    span = hi - lo if hi > lo else 1.0
    return store_derived(prior, "refgp_v2_logits",  # type: ignore[no-any-return]
                         (smoothed_logits(V.mean(axis=1), V.shape[1], lo, span), lo, lo + span))


def smoothed_logits(means: np.ndarray, n_references: int, lo: float, span: float) -> np.ndarray:
    """logit of the references' item means rescaled to [0, 1] by ``(lo, span)`` and smoothed with ``SMOOTH``
    pseudo-counts of ``n_references`` (finite logits for items every reference solves or fails)."""
    t = (np.asarray(means, dtype=np.float64) - lo) / span
    t = (n_references * t + SMOOTH) / (n_references + 2.0 * SMOOTH)
    return np.asarray(np.log(t) - np.log1p(-t))


def fit_delta(logits: np.ndarray, cnt: np.ndarray, ysum01: np.ndarray, delta0: float = 0.0,
              prior_sd: float = DELTA_SD) -> float:
    """argmax_delta sum_b [y_b log p_b + (c_b - y_b) log(1 - p_b)] - delta^2 / (2 prior_sd^2),
    ``p_b = sigmoid(logits_b + delta)``, ``y_b`` in [0, c_b] (Newton, concave objective)."""
    d = float(delta0)
    prec = 1.0 / prior_sd ** 2
    for _ in range(30):
        p = 1.0 / (1.0 + np.exp(-(logits + d)))
        g = float((ysum01 - cnt * p).sum()) - prec * d
        h = float((cnt * p * (1.0 - p)).sum()) + prec
        step = max(-2.0, min(2.0, g / h))
        d += step
        if abs(step) < 1e-9:
            break
    return d


def delta_scale(prior: BucketPrior) -> float:
    """The prior sd of the logit shift of ``evidence_mix``, read off the references: ``DELTA_SPREAD`` x the sd
    of every reference's own shift (its scores fitted against the references' item means under
    ``N(0, DELTA_SD^2)``), at least ``DELTA_SD_MIN``. On MuSR (model means 0.32-0.54) it is about 0.4 logits,
    on math_hard (0.0-0.7) about 3. Cached per prior; O(30 B M)."""
    cached = derived(prior, "refgp_v3_delta_sd")
    if cached is not None:
        return float(cached)
    logits, lo, hi = logit_means(prior)
    V = prior.bucket_vectors
    Nb = prior.bucket_sizes.astype(np.float64)
    Y = np.clip((V - lo) / (hi - lo), 0.0, 1.0) * Nb[:, None]  # (B, M) per-bucket sums on [0, 1]
    d = np.zeros(V.shape[1])
    for _ in range(30):  # Newton for every reference at once (concave; the N(0, DELTA_SD^2) prior)
        p = 1.0 / (1.0 + np.exp(-(logits[:, None] + d[None, :])))
        g = (Y - Nb[:, None] * p).sum(axis=0) - d / DELTA_SD ** 2
        h = (Nb[:, None] * p * (1.0 - p)).sum(axis=0) + 1.0 / DELTA_SD ** 2
        step = np.clip(g / h, -2.0, 2.0)
        d += step
        if float(np.abs(step).max()) < 1e-9:
            break
    sd = float(np.std(d, ddof=1)) if d.size > 1 else DELTA_SD / DELTA_SPREAD
    return float(store_derived(prior, "refgp_v3_delta_sd", max(DELTA_SPREAD * sd, DELTA_SD_MIN)))
