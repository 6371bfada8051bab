"""A design-based coreset: items drawn at random with known inclusion probabilities, stratified on the
reference models' item means, and a model-assisted difference estimator of the full-benchmark mean
whose interval holds for any target model, one better than every reference included (issue 25 §3).

The score-based predictors (paper 002) regress a benchmark mean on the coreset scores across the
references; their intervals are calibrated on the references, so a target outside them (the best
models) has no guarantee. Here the references only *design* the draw and *assist* the estimate; the
interval comes from the randomisation (Särndal, Swensson & Wretman 1992, *Model Assisted Survey
Sampling*: stratified sampling §3.7, the difference / GREG estimator §6.3-6.5; Cochran 1977 §5):

* **Strata**: the N items sorted by the references' mean score ``p_i`` and cut into ``H`` groups of
  equal size (``H = min(MAX_STRATA, floor(n / 2))``).
* **Allocation** (Neyman, SSW §3.7.4): ``n_h`` proportional to ``N_h S_h``, with ``S_h^2`` the
  references' average within-stratum variance of their item scores; at least 2 per stratum (a
  variance needs two) and at most ``N_h``. Inside a stratum the items are a uniform sample without
  replacement, so item i's inclusion probability is ``pi_i = n_h / N_h``, recorded with the coreset.
* **Working model** (only predicts; a wrong one widens the interval, never breaks it):
  ``mu_i(delta) = lo + (hi - lo) sigmoid(logit(p~_i) + delta)``, the references' smoothed item mean
  shifted by one ability offset ``delta`` in logit space, fitted on the target's drawn items by the
  design-weighted (``1 / pi_i``) fractional-response likelihood (Newton; a N(0, 3^2) prior keeps it
  finite when every drawn item is solved).
* **Estimate** (the difference estimator with the fitted ``mu``, i.e. GREG):

      theta = (1 / N) [ sum_{i=1..N} mu_i + sum_h (N_h / n_h) sum_{i in s_h} (y_i - mu_i) ]

* **Variance** (stratified, with the finite-population correction):
  ``V = sum_h (N_h / N)^2 (1 - n_h / N_h) s_h^2 / n_h``, where ``s_h^2`` is the drawn residuals'
  variance in stratum h with one pseudo-observation of the largest variance a score in ``[lo, hi]``
  with mean ``mu~_i`` can have, ``(mu~_i - lo)(hi - mu~_i)`` averaged over the stratum's items, where
  ``mu~`` is the working model refitted on the drawn scores smoothed by one pseudo-count towards the
  middle (``(n y + 1/2) / (n + 1)`` on [0, 1]): drawn items that happen to agree (a model that solved
  none of the drawn items) do not give a zero-width interval, and a stratum that every reference
  solves or fails keeps a small one. The interval is
  ``theta +- t_{df} sqrt(V)`` with Satterthwaite's degrees of freedom, clipped to ``[lo, hi]``.

The interval's validity rests on the random draw alone (and the normal approximation of a stratified
mean), not on the target resembling the references; it is exact in the limit of large strata and
conservative where the pseudo-observation dominates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from evalplan.core.sequential.refgp_means import DELTA_SD, fit_delta, smoothed_logits

MAX_STRATA = 10
MIN_PER_STRATUM = 2
PSEUDO_OBSERVATIONS = 1.0  # weight of the bounded-variance floor in each stratum's residual variance

__all__ = ["DesignCoreset", "DesignEstimate", "design_coreset", "design_estimate", "neyman_allocation"]


@dataclass(frozen=True)
class DesignCoreset:
    """A stratified draw: the items (sorted), each item's stratum and inclusion probability, the
    population's stratum sizes and the working model's logits of every item (what an estimate needs)."""

    items: np.ndarray  # (n,) item indices into the benchmark, sorted
    item_strata: np.ndarray  # (N,) the stratum of every item of the benchmark
    logits: np.ndarray  # (N,) logit of the smoothed, [0, 1]-rescaled reference item mean
    lo: float
    hi: float

    @property
    def n_items(self) -> int:
        return int(self.logits.shape[0])

    @property
    def strata(self) -> np.ndarray:
        """(n,) the stratum of each drawn item."""
        return np.asarray(self.item_strata[self.items])

    @property
    def stratum_sizes(self) -> np.ndarray:
        """(H,) N_h."""
        return np.bincount(self.item_strata)

    @property
    def inclusion(self) -> np.ndarray:
        """(n,) each drawn item's inclusion probability ``pi_i = n_h / N_h``."""
        drawn = np.bincount(self.strata, minlength=self.stratum_sizes.size)
        return np.asarray(drawn[self.strata] / self.stratum_sizes[self.strata])


@dataclass(frozen=True)
class DesignEstimate:
    estimate: float
    std_error: float
    lower: float
    upper: float
    df: float
    delta: float  # the working model's fitted logit shift
    model_only: float  # the working model's prediction alone, (1 / N) sum mu_i


def neyman_allocation(sizes: np.ndarray, sds: np.ndarray, n: int, minimum: int = MIN_PER_STRATUM) -> np.ndarray:
    """``n_h`` proportional to ``N_h S_h`` (largest remainder), each in ``[min(minimum, N_h), N_h]``, summing to
    ``n`` (SSW §3.7.4; strata whose quota exceeds ``N_h`` are taken whole and the rest re-allocated)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if not 1 <= n <= int(sizes.sum()):
        raise ValueError(f"n={n} must be between 1 and the number of items {int(sizes.sum())}")
    floor = np.minimum(sizes, minimum)
    if int(floor.sum()) > n:
        raise ValueError(f"n={n} is below {minimum} items per stratum ({int(floor.sum())})")
    weight = sizes * np.maximum(np.asarray(sds, dtype=np.float64), 1e-9)
    counts = floor.copy()
    free = np.ones(sizes.size, dtype=bool)
    while True:
        left = n - int(counts[~free].sum()) - int(floor[free].sum())
        w = np.where(free, weight, 0.0)
        quota = floor + (left * w / w.sum() if w.sum() > 0 else 0.0)
        over = free & (quota >= sizes)
        if not over.any():
            break
        counts[over], free[over] = sizes[over], False
        if not free.any():
            return np.asarray(counts, dtype=np.int64)
    base = np.floor(quota).astype(np.int64)
    base[~free] = counts[~free]
    rest = n - int(base.sum())
    order = np.lexsort((np.arange(sizes.size), -(quota - np.floor(quota)) * free))
    for h in order:
        if rest <= 0:
            break
        if free[h] and base[h] < sizes[h]:
            base[h] += 1
            rest -= 1
    return np.asarray(base, dtype=np.int64)


def _logits(Y: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The working model's logits: the references' item means, clipped into ``[lo, hi]`` (a declared range the
    references may not fill), smoothed as the refgp family's logit-shift mean."""
    span = hi - lo if hi > lo else 1.0
    return smoothed_logits(np.clip(Y.mean(axis=0), lo, lo + span), Y.shape[0], lo, span)


def design_coreset(Y: np.ndarray, n: int, seed: int = 0, score_range: tuple[float, float] | None = None,
                   max_strata: int = MAX_STRATA) -> DesignCoreset:
    """Draw ``n`` items of the references' ``(models x items)`` scores ``Y`` by the stratified design
    (module docstring); ``score_range`` the benchmark's bounds (default: the scores' own)."""
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[0] < 1 or not np.isfinite(Y).all():
        raise ValueError("Y: a finite (models x items) matrix with at least one reference is needed")
    N = Y.shape[1]
    if not 2 <= n <= N:
        raise ValueError(f"n={n}: a design coreset needs 2 to {N} items")
    lo, hi = score_range if score_range is not None else (float(Y.min()), float(Y.max()))
    H = max(1, min(max_strata, n // MIN_PER_STRATUM, N // MIN_PER_STRATUM))
    order = np.argsort(Y.mean(axis=0), kind="stable")
    stratum_of = np.empty(N, dtype=np.int64)
    for h, block in enumerate(np.array_split(order, H)):
        stratum_of[block] = h
    sizes = np.bincount(stratum_of, minlength=H)
    sds = np.array([math.sqrt(float(np.mean(np.var(Y[:, stratum_of == h], axis=1, ddof=1))))
                    if sizes[h] > 1 else 0.0 for h in range(H)])
    counts = neyman_allocation(sizes, sds, n)
    rng = np.random.default_rng([seed, 25])
    picked = [rng.choice(np.flatnonzero(stratum_of == h), size=int(counts[h]), replace=False) for h in range(H)]
    items = np.sort(np.concatenate(picked)).astype(np.int64)
    return DesignCoreset(items=items, item_strata=stratum_of, logits=_logits(Y, lo, hi), lo=float(lo), hi=float(hi))


def design_estimate(design: DesignCoreset, y: np.ndarray, level: float = 0.95) -> DesignEstimate:
    """The difference estimate, its standard error and ``level`` interval of a target whose scores on
    ``design.items`` are ``y`` (module docstring)."""
    y = np.asarray(y, dtype=np.float64)
    if y.shape != design.items.shape or not np.isfinite(y).all():
        raise ValueError(f"y: {design.items.size} finite scores, one per coreset item, are needed")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: must be in (0, 1), got {level!r}")
    lo, hi = design.lo, design.hi
    span = hi - lo if hi > lo else 1.0
    N = float(design.n_items)
    sizes = design.stratum_sizes.astype(np.float64)
    w = 1.0 / design.inclusion
    drawn_logits = design.logits[design.items]
    y01 = np.clip((y - lo) / span, 0.0, 1.0)
    # the design-weighted fractional-response MAP of the shift: refgp's fit with the weights as counts
    delta = fit_delta(drawn_logits, w, w * y01, 0.0, DELTA_SD)
    mu_all = lo + span / (1.0 + np.exp(-(design.logits + delta)))
    mu = mu_all[design.items]
    resid = y - mu
    model_total = float(mu_all.sum())
    estimate = (model_total + float(w @ resid)) / N
    n = float(y.size)
    smoothed = fit_delta(drawn_logits, w, w * (n * y01 + 0.5) / (n + 1.0), 0.0, DELTA_SD)
    mu_floor = 1.0 / (1.0 + np.exp(-(design.logits + smoothed)))
    bound = span * span * mu_floor * (1.0 - mu_floor)  # the largest variance of a [lo, hi] score with that mean
    var_terms, dfs = [], []
    strata = design.strata
    for h in range(sizes.size):
        e = resid[strata == h]
        n_h = e.size
        if n_h == 0:
            continue
        floor = float(np.mean(bound[design.item_strata == h]))
        ss = float(((e - e.mean()) ** 2).sum()) if n_h > 1 else 0.0
        s2 = (ss + PSEUDO_OBSERVATIONS * floor) / (n_h - 1 + PSEUDO_OBSERVATIONS)
        a = (sizes[h] / N) ** 2 * max(1.0 - n_h / sizes[h], 0.0) / n_h
        var_terms.append(a * s2)
        dfs.append(n_h - 1 + PSEUDO_OBSERVATIONS)
    V = float(sum(var_terms))
    den = sum(v * v / d for v, d in zip(var_terms, dfs))
    df = float(V * V / den) if den > 0 else math.inf
    se = math.sqrt(max(V, 0.0))
    q = float(stats.t.ppf(0.5 + level / 2.0, df)) if math.isfinite(df) else float(stats.norm.ppf(0.5 + level / 2.0))
    return DesignEstimate(estimate=float(estimate), std_error=se, lower=float(max(lo, estimate - q * se)),
                          upper=float(min(hi, estimate + q * se)), df=df, delta=float(delta),
                          model_only=model_total / N)

