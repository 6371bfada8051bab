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


# --------------------------------------------------------------------------- paired sessions (compare_to)

DECISIONS = ("better", "worse", "within")


def decision_of(interval: tuple[float, float], delta: float | None) -> str | None:
    """The decision an interval for ``target - compare_to`` supports: ``better`` (above 0), ``worse`` (below 0),
    ``within`` (inside ``[-delta, delta]``), else None. When the interval covers the difference, the decision is
    right: ``better`` / ``worse`` have the difference's sign, ``within`` has ``|difference| <= delta``."""
    lo, hi = float(interval[0]), float(interval[1])
    if lo > 0.0:
        return "better"
    if hi < 0.0:
        return "worse"
    if delta is not None and lo >= -delta and hi <= delta:
        return "within"
    return None


class PairedSession:
    """A paired comparison session (``compare_to``, issue 33 item 2): the target's scores minus the comparator's
    on the same items, the comparator's scores known beforehand (a model's stored scores, or what an earlier
    session observed).

    * Population: the items the comparator has a score on (``P``, all items for a fully scored model). Items are
      drawn uniformly at random without replacement from ``P`` (seeded by ``seed`` and n, so a replay is
      identical).
    * Interval: the hedged-capital betting confidence sequence of sampling without replacement
      (:class:`~evalplan.core.sequential.stopping.BettingCS`, Waudby-Smith & Ramdas 2023) on the paired differences
      ``d_j = y_j - c_j`` in ``[-(hi - lo), hi - lo]``: valid at every n at once, so at the data-dependent stop on
      a decision. The target's own interval is the comparator's known mean over ``P`` plus it.
    * Stop: at the first n >= ``min_items`` whose interval supports a decision (:func:`decision_of`;
      ``stop_reason`` ``"decision"``), or whose half-width is <= ``half_width`` (``"precision"``), or at
      ``max_items`` / when ``P`` is exhausted.

    The estimand is the mean difference over ``P`` (the full benchmark when the comparator is scored on every
    item). It needs the caller to evaluate the proposed items (others are refused by the service)."""

    def __init__(self, comparator: ArrayLike, *, score_range: tuple[float, float], level: float = DEFAULT_LEVEL,
                 delta: float | None = None, min_items: int = 10, half_width: float = 0.0,
                 max_items: int | None = None, seed: int = 0, batch_size: int = 1) -> None:
        c = np.asarray(comparator, dtype=np.float64)
        if c.ndim != 1 or c.size == 0:
            raise ValueError("compare_to: needs the comparator's scores over the benchmark's items")
        lo, hi = float(score_range[0]), float(score_range[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
            raise ValueError("compare_to: a paired session needs a bounded score range")
        width = hi - lo
        if delta is not None and not (0.0 < float(delta) <= width):
            raise ValueError(f"delta: must be > 0 and at most the score range's width {width:g}, got {delta!r}")
        self.level = check_level(level)
        self.comparator = c
        self.population = np.flatnonzero(~np.isnan(c))
        if self.population.size == 0:
            raise ValueError("compare_to: the comparator has no score on this benchmark's items")
        self.in_population = ~np.isnan(c)
        self.n_items = int(c.size)
        self.score_range = (lo, hi)
        self.delta = None if delta is None else float(delta)
        self.min_items, self.half_width = int(min_items), float(half_width)
        self.max_items, self.seed, self.batch_size = max_items, int(seed), int(batch_size)
        self.comparator_mean = float(c[self.population].mean())
        self.cs = BettingCS(int(self.population.size), level=self.level, score_range=(-width, width))
        self._observed = np.zeros(self.n_items, dtype=bool)
        self._sum = self._sum_sq = 0.0
        self.n_observed = 0
        self.stop_reason: str | None = None
        self.decision: str | None = None
        self.decided_at: int | None = None
        self.moves: list[dict[str, object]] = []  # every change of the supported decision: {n, decision}
        self.trajectory: list[dict[str, object]] = []

    # ------------------------------------------------------------------ state
    @property
    def stopped(self) -> bool:
        return self.stop_reason is not None

    @property
    def difference(self) -> float:
        """The mean paired difference, inside the confidence sequence (0 before any pair)."""
        if self.n_observed == 0:
            return 0.0
        lo, hi = self.difference_ci
        return float(min(max(self._sum / self.n_observed, lo), hi))

    @property
    def difference_ci(self) -> tuple[float, float]:
        if self.cs.t == 0:
            width = self.score_range[1] - self.score_range[0]
            return -width, width
        return self.cs.interval()

    @property
    def difference_variance(self) -> float:
        n, N = self.n_observed, int(self.population.size)
        if n < 2:
            width = self.score_range[1] - self.score_range[0]
            return width * width
        s2 = max(self._sum_sq - n * (self._sum / n) ** 2, 0.0) / (n - 1)
        return (1.0 - n / N) * s2 / n

    @property
    def estimate(self) -> float:
        lo, hi = self.score_range
        return float(min(max(self.comparator_mean + self.difference, lo), hi))

    @property
    def variance(self) -> float:
        return self.difference_variance

    @property
    def ci(self) -> tuple[float, float]:
        a, b = self.difference_ci
        lo, hi = self.score_range
        return max(lo, self.comparator_mean + a), min(hi, self.comparator_mean + b)

    @property
    def hyperparameters(self) -> dict[str, object]:
        return {"compare": self.state()}

    def state(self) -> dict[str, object]:
        lo, hi = self.difference_ci
        return {"delta": self.delta, "population": int(self.population.size), "n_pairs": int(self.n_observed),
                "comparator_mean": self.comparator_mean, "difference": self.difference,
                "difference_ci": [float(lo), float(hi)], "decision": self.decision, "decided_at": self.decided_at,
                "supported": decision_of((lo, hi), self.delta) if self.cs.t else None, "moves": list(self.moves)}

    # ------------------------------------------------------------------ propose / observe
    def propose(self) -> list[int]:
        if self.stopped:
            return []
        left = int(self.population.size) - self.n_observed
        if self.max_items is not None:
            left = min(left, self.max_items - self.n_observed)
        k = min(self.batch_size, max(left, 0))
        if k <= 0:
            return []
        rng = np.random.default_rng([self.seed, self.n_observed, 13])
        free = self.population[~self._observed[self.population]]
        return [int(i) for i in rng.choice(free, size=k, replace=False)]

    def observe(self, item: int, score: float) -> None:
        if self.stopped:
            raise ValueError(f"item: session stopped ({self.stop_reason}); no more observations")
        index = int(item)
        if not 0 <= index < self.n_items or not self.in_population[index]:
            raise ValueError(f"item: {item!r} has no comparator score; a paired session draws from those that do")
        if self._observed[index]:
            raise ValueError(f"item: {index} already observed")
        d = float(score) - float(self.comparator[index])
        self._observed[index] = True
        self.n_observed += 1
        self._sum += d
        self._sum_sq += d * d
        self.cs.update(d)
        lo, hi = self.difference_ci
        supported = decision_of((lo, hi), self.delta)
        last = self.moves[-1]["decision"] if self.moves else None
        if supported != last:
            self.moves.append({"n": self.n_observed, "decision": supported})
        a, b = self.ci
        self.trajectory.append({"n": self.n_observed, "estimate": self.estimate, "variance": self.variance,
                                "ci": [a, b], "difference": self.difference, "difference_ci": [lo, hi],
                                "decision": supported})
        if self.n_observed >= self.min_items and supported is not None:
            self.decision, self.decided_at, self.stop_reason = supported, self.n_observed, "decision"
        elif self.n_observed >= self.min_items and self.half_width > 0 and (hi - lo) / 2.0 <= self.half_width:
            self.stop_reason = "precision"
        elif self.max_items is not None and self.n_observed >= self.max_items:
            self.stop_reason = "max_items"
        elif self.n_observed >= self.population.size:
            self.stop_reason = "exhausted"
            self.decision = decision_of((lo, hi), self.delta)
            self.decided_at = self.n_observed if self.decision else None
