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
* **Take-all stratum** (optional, SSW §3.7: a stratum sampled in full): items fixed beforehand -- a
  score-based method's selection -- form one more stratum with ``pi_i = 1``; they enter the estimate
  exactly and add no variance, and the draw covers the other items. The interval stays valid for any
  target, because every item outside the take-all stratum still has a known, positive inclusion
  probability.
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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from evalplan.core.sequential.refgp_means import DELTA_SD, fit_delta, smoothed_logits

MAX_STRATA = 10
MIN_PER_STRATUM = 2
PSEUDO_OBSERVATIONS = 1.0  # weight of the bounded-variance floor in each stratum's residual variance

__all__ = ["DesignCoreset", "DesignEstimate", "design_coreset", "design_estimate", "mean_of_estimates",
           "neyman_allocation"]


@dataclass(frozen=True)
class DesignCoreset:
    """A stratified draw: the items (sorted), each item's stratum and inclusion probability, the
    population's stratum sizes and the working model's logits of every item (what an estimate needs)."""

    items: np.ndarray  # (n,) item indices into the benchmark, sorted
    item_strata: np.ndarray  # (N,) the stratum of every item of the benchmark
    logits: np.ndarray  # (N,) logit of the smoothed, [0, 1]-rescaled reference item mean
    lo: float
    hi: float

    def state(self) -> dict[str, object]:
        """JSON-ready fields (what a stored coreset keeps to estimate later); :meth:`from_state` reads them."""
        return {"items": self.items.tolist(), "item_strata": self.item_strata.tolist(),
                "logits": self.logits.tolist(), "lo": self.lo, "hi": self.hi}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> DesignCoreset:
        return cls(items=np.asarray(state["items"], dtype=np.int64),
                   item_strata=np.asarray(state["item_strata"], dtype=np.int64),
                   logits=np.asarray(state["logits"], dtype=np.float64), lo=float(state["lo"]), hi=float(state["hi"]))

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
                   max_strata: int = MAX_STRATA, take_all: Sequence[int] = ()) -> DesignCoreset:
    """Draw ``n`` items of the references' ``(models x items)`` scores ``Y`` by the stratified design
    (module docstring); ``score_range`` the benchmark's bounds (default: the scores' own). ``take_all``:
    item indices in the coreset for certain (the last stratum, ``pi = 1``); the other ``n - len(take_all)``
    items (at least 2, or none when ``take_all`` holds every item) are drawn from the rest."""
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[0] < 1 or not np.isfinite(Y).all():
        raise ValueError("Y: a finite (models x items) matrix with at least one reference is needed")
    N = Y.shape[1]
    fixed = np.unique(np.asarray(take_all, dtype=np.int64))
    if fixed.size != len(take_all) or (fixed.size and (fixed[0] < 0 or fixed[-1] >= N)):
        raise ValueError(f"take_all: distinct item indices in [0, {N}) are needed")
    rest = np.setdiff1d(np.arange(N), fixed)
    m = n - fixed.size
    if not (2 <= m <= rest.size or m == rest.size == 0) or n > N:
        low = fixed.size + min(2, rest.size)
        raise ValueError(f"n={n}: a design coreset needs {low} to {N} items"
                         + (f" ({fixed.size} taken whole, at least 2 drawn)" if fixed.size else ""))
    lo, hi = score_range if score_range is not None else (float(Y.min()), float(Y.max()))
    H = max(1, min(max_strata, m // MIN_PER_STRATUM, rest.size // MIN_PER_STRATUM)) if m else 0
    stratum_of = np.full(N, H, dtype=np.int64)  # the take-all stratum is the last (absent when take_all is empty)
    if m:
        order = rest[np.argsort(Y[:, rest].mean(axis=0), kind="stable")]
        for h, block in enumerate(np.array_split(order, H)):
            stratum_of[block] = h
        sizes = np.bincount(stratum_of, minlength=H)[:H]
        sds = np.array([math.sqrt(float(np.mean(np.var(Y[:, stratum_of == h], axis=1, ddof=1))))
                        if sizes[h] > 1 else 0.0 for h in range(H)])
        counts = neyman_allocation(sizes, sds, m)
        rng = np.random.default_rng([seed, 25])
        picked = [rng.choice(np.flatnonzero(stratum_of == h), size=int(counts[h]), replace=False) for h in range(H)]
        drawn = np.concatenate(picked)
    else:
        drawn = np.zeros(0, dtype=np.int64)
    items = np.sort(np.concatenate([drawn, fixed])).astype(np.int64)
    return DesignCoreset(items=items, item_strata=stratum_of, logits=_logits(Y, lo, hi), lo=float(lo), hi=float(hi))


def design_estimate(design: DesignCoreset, y: np.ndarray, level: float = 0.95,
                    delta: float | None = None) -> DesignEstimate:
    """The difference estimate, its standard error and ``level`` interval of a target whose scores on
    ``design.items`` are ``y`` (module docstring). ``delta``: the working model's logit shift given instead of
    fitted on the drawn items (a level set by another predictor, e.g. a score-based model's estimate: the
    estimator stays design-unbiased for any shift fixed before the draw's scores are seen)."""
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
    if delta is None:
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



def mean_of_estimates(parts: Sequence[DesignEstimate], level: float, lo: float, hi: float) -> DesignEstimate:
    """The mean of independent design estimates (one per benchmark, each its own draw): variance
    ``sum V_b / B^2``, Welch-Satterthwaite degrees of freedom over the parts (SSW §3.7 for independent
    strata), the Student-t interval at ``level`` clipped to ``[lo, hi]``."""
    if not parts:
        raise ValueError("mean_of_estimates: at least one estimate is needed")
    B = float(len(parts))
    est = float(np.mean([p.estimate for p in parts]))
    terms = [(p.std_error / B) ** 2 for p in parts]
    V = float(sum(terms))
    den = sum(v * v / p.df for v, p in zip(terms, parts) if v > 0 and math.isfinite(p.df))
    df = float(V * V / den) if den > 0 else math.inf
    se = math.sqrt(V)
    q = float(stats.t.ppf(0.5 + level / 2.0, df)) if math.isfinite(df) else float(stats.norm.ppf(0.5 + level / 2.0))
    return DesignEstimate(estimate=est, std_error=se, lower=float(max(lo, est - q * se)),
                          upper=float(min(hi, est + q * se)), df=df, delta=float("nan"),
                          model_only=float(np.mean([p.model_only for p in parts])))
