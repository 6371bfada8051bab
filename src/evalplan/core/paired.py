"""Paired comparison of two models on the items both were scored on ("is B better than A?").

The estimand is the full-benchmark difference ``mean_j (b_j - a_j)`` over the benchmark's ``N``
items. From ``n`` items observed for both models:

* ``paired_interval``: the mean paired difference ``d̄`` with the Student-t interval
  ``d̄ ± t_{n-1} · s / sqrt(n) · sqrt((N - n) / (N - 1))``: the CLT interval of a mean of a simple
  random sample drawn *without replacement* from a finite population (Cochran 1977, *Sampling
  Techniques*, §2.4-2.5: the finite-population correction); ``n = N`` gives the exact difference.
  With ``s = 0`` (every observed pair agrees) the standard deviation is floored at that of one
  disagreement in ``n + 1`` pairs, so a handful of ties does not claim certainty.
* ``paired_sequence``: an anytime-valid confidence sequence for the same difference, the
  hedged-capital betting CS of ``evalplan.core.sequential.stopping.BettingCS`` (Waudby-Smith &
  Ramdas 2023, §5, sampling without replacement) run on the paired differences, which lie in
  ``[-(hi - lo), hi - lo]`` for scores in ``[lo, hi]``. It holds at every ``n`` at once, so two running
  sessions may be compared after every observation.

Both are valid for items drawn uniformly at random (a random coreset, ``rs_mean`` sessions, a random
subset); items chosen adaptively by an active session are not a random sample, and then the paired
interval describes the observed items (the sessions' own estimates answer for the full benchmark).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import norm, t

from evalplan.core.sequential.stopping import DEFAULT_LEVEL, BettingCS, check_level


@dataclass(frozen=True)
class PairedDifference:
    """``b - a`` on the common items: ``n`` pairs, mean difference, its standard error (with the
    finite-population correction), the interval at ``level``, and counts of items each model won."""

    n: int
    n_population: int
    mean: float
    std_error: float
    interval: tuple[float, float]
    level: float
    b_better: int
    a_better: int
    ties: int


def _checked(a: ArrayLike, b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("a and b must be 1-d arrays of the same length (the scores on the common items)")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("scores must be finite")
    return x, y


def paired_interval(a: ArrayLike, b: ArrayLike, *, n_population: int | None = None,
                    level: float = DEFAULT_LEVEL) -> PairedDifference:
    """The mean of ``b - a`` and its finite-population Student-t interval (module docstring).
    ``n_population``: the benchmark's item count ``N``; ``None``: an infinite population (no
    finite-population correction)."""
    level = check_level(level)
    x, y = _checked(a, b)
    n = int(x.size)
    if n == 0:
        raise ValueError("no common items: the two models share no scored item")
    N = 0 if n_population is None else int(n_population)
    if n_population is not None and N < n:
        raise ValueError(f"n_population ({N}) is smaller than the number of pairs ({n})")
    d = y - x
    mean = float(d.mean())
    wins = int(np.sum(d > 0)), int(np.sum(d < 0))
    ties = n - wins[0] - wins[1]
    if n == N:
        return PairedDifference(n, N, mean, 0.0, (mean, mean), level, wins[0], wins[1], ties)
    if n == 1:
        return PairedDifference(n, N, mean, math.inf, (-math.inf, math.inf), level, wins[0], wins[1], ties)
    sd = float(d.std(ddof=1))
    scale = float(np.max(np.abs(d))) or float(np.max(np.abs(np.concatenate([x, y])))) or 1.0
    floor = scale * math.sqrt(1.0 / (n + 1))  # one disagreement of the largest size in n + 1 pairs
    sd = max(sd, floor) if sd == 0.0 else sd
    fpc = math.sqrt((N - n) / (N - 1)) if N else 1.0
    se = sd / math.sqrt(n) * fpc
    q = float(t.ppf(0.5 + level / 2, df=n - 1))
    return PairedDifference(n, N, mean, se, (mean - q * se, mean + q * se), level, wins[0], wins[1], ties)


def paired_sequence(a: ArrayLike, b: ArrayLike, *, n_population: int, score_range: tuple[float, float],
                    level: float = DEFAULT_LEVEL, breaks: int = 1000) -> list[tuple[float, float]]:
    """The anytime-valid confidence sequence for the full-benchmark mean of ``b - a``, one interval
    after each pair in the given (arrival) order: valid simultaneously for every prefix."""
    x, y = _checked(a, b)
    lo, hi = float(score_range[0]), float(score_range[1])
    width = hi - lo
    if not (math.isfinite(width) and width > 0):
        raise ValueError("score_range: needs finite bounds lo < hi")
    if int(n_population) < x.size:
        raise ValueError("n_population is smaller than the number of pairs")
    cs = BettingCS(int(n_population), level=level, score_range=(-width, width), breaks=breaks)
    out: list[tuple[float, float]] = []
    for di in (y - x).tolist():
        cs.update(di)
        out.append(cs.interval())
    return out


def normal_difference(estimate_a: float, variance_a: float, estimate_b: float, variance_b: float,
                      level: float = DEFAULT_LEVEL) -> tuple[float, tuple[float, float]]:
    """``b - a`` of two independent estimates (two sessions' posteriors) with the normal interval."""
    level = check_level(level)
    diff = float(estimate_b) - float(estimate_a)
    se = math.sqrt(max(float(variance_a), 0.0) + max(float(variance_b), 0.0))
    z = float(norm.ppf(0.5 + level / 2))
    return diff, (diff - z * se, diff + z * se)
