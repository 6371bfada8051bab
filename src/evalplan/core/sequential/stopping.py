"""Stopping in the user's units, generic over every sequential estimator (API.md "Sessions:
precision stopping").

* ``StopRule``: stop once the ``level`` interval's half-width is <= ``half_width`` (score units)
  and at least ``min_items`` items are observed (``stop_reason: "precision"``; ``half_width: 0``
  never stops on precision).
* ``interval_at``: an estimator's interval at any level (its own ``interval(level)`` when it has
  one, else the normal interval from ``estimate`` / ``variance``), clipped to the score range.
* ``BettingCS``: the hedged-capital betting confidence sequence for the mean of a finite population
  of bounded scores sampled uniformly without replacement (Waudby-Smith & Ramdas 2023, "Estimating
  means of bounded random variables by betting", JRSS-B, §5 and App. on WoR sampling; the defaults of
  ``confseq.betting.hedged_cs``). ``P(for all t: mean in CS_t) >= level``: it stays valid however often
  the caller looks, provided the items are drawn uniformly at random without replacement.
* ``sequential_half_width``: the fixed-width sequential interval of Chow & Robbins (1965) for a mean of
  (martingale) terms, the terms' variance estimate plus a floor ``span^2 / n`` from the score range, and an
  optional outer guard by a confidence sequence: the default precision stop of ``active_design`` and
  ``random`` (``interval_kind: "sequential"``; docs/SEQUENTIAL.md "Precision stop").
* ``PrecisionSession``: wraps any estimator (``estimate``, ``variance``, ``propose``, ``observe``,
  ``stopped``, ``stop_reason``, ``trajectory``) and applies the rule, the level and the range.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.stats import norm

DEFAULT_LEVEL = 0.95
DEFAULT_MIN_ITEMS = 10
STOP_KEYS = ("half_width", "level", "min_items", "anytime_valid")


def _is_real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


def check_level(level: Any, field: str = "level") -> float:
    if not _is_real(level) or not 0.0 < float(level) < 1.0:
        raise ValueError(f"{field}: must be a number strictly between 0 and 1, got {level!r}")
    return float(level)


@dataclass(frozen=True)
class StopRule:
    """Precision stopping: ``level`` interval half-width <= ``half_width`` after ``min_items``."""

    half_width: float
    level: float = DEFAULT_LEVEL
    min_items: int = DEFAULT_MIN_ITEMS
    anytime_valid: bool = False

    @classmethod
    def from_dict(cls, given: Any) -> StopRule:
        """Checked rule from the request's ``stop`` object; ValueError naming ``stop.<key>``."""
        if not isinstance(given, dict):
            raise ValueError(f"stop: must be an object {{half_width, level?, min_items?, anytime_valid?}}, "
                             f"got {given!r}")
        unknown = [k for k in given if k not in STOP_KEYS]
        if unknown:
            raise ValueError(f"stop.{unknown[0]}: unknown key (allowed: {', '.join(STOP_KEYS)})")
        if "half_width" not in given:
            raise ValueError("stop.half_width: required (score units; 0 never stops on precision)")
        hw = given["half_width"]
        if not _is_real(hw) or float(hw) < 0:
            raise ValueError(f"stop.half_width: must be a finite number >= 0, got {hw!r}")
        level = check_level(given.get("level", DEFAULT_LEVEL), "stop.level")
        mi = given.get("min_items", DEFAULT_MIN_ITEMS)
        if isinstance(mi, bool) or not isinstance(mi, numbers.Integral) or int(mi) < 1:
            raise ValueError(f"stop.min_items: must be an integer >= 1, got {mi!r}")
        av = given.get("anytime_valid", False)
        if not isinstance(av, bool):
            raise ValueError(f"stop.anytime_valid: must be true or false, got {av!r}")
        return cls(half_width=float(hw), level=level, min_items=int(mi), anytime_valid=av)

    def as_dict(self) -> dict[str, Any]:
        return {"half_width": self.half_width, "level": self.level, "min_items": self.min_items,
                "anytime_valid": self.anytime_valid}


def clip_interval(lo: float, hi: float, score_range: tuple[float, float]) -> tuple[float, float]:
    """``[lo, hi]`` intersected with the score range (infinite bounds leave that side alone)."""
    a, b = score_range
    lo, hi = min(max(lo, a), b), max(min(hi, b), a)
    return float(lo), float(hi)


def normal_interval(estimate: float, variance: float, level: float) -> tuple[float, float]:
    half = _normal_quantile(0.5 + level / 2.0) * math.sqrt(max(variance, 0.0))
    return estimate - half, estimate + half


@lru_cache(maxsize=256)
def _normal_quantile(p: float) -> float:
    """``norm.ppf(p)``, memoized (scipy's ppf costs about 0.1 ms a call; sessions ask every observation)."""
    return float(norm.ppf(p))


def sequential_half_width(n: int, s2: float, span: float, level: float, *, fpc: float = 1.0,
                          n_eff: float | None = None, unit_mean: float | None = None,
                          guard_half_width: float | None = None, guard: float = 0.0) -> float:
    """Half-width of the fixed-width sequential interval of Chow & Robbins (1965, "On the asymptotic theory
    of fixed-width sequential confidence intervals for the mean", Ann. Math. Statist. 36): the stop
    ``N = inf{n >= n0 : n >= (z / d)^2 (V_n + 1/n)}`` is the first n where
    ``z sqrt(fpc (V_n + 1/n) / n) <= d``; its interval covers with probability -> ``level`` as d -> 0
    (their Thm 2), the ``1/n`` keeping a lucky small ``V_n`` from stopping early. Here ``V_n = s2`` the terms'
    sample variance and the ``1/n`` is in score units, ``span^2 / n`` (``span`` the width of the score range;
    Chow & Robbins' ``n^-1`` for scores in [0, 1]). ``fpc``: the finite-population correction ``1 - n/N`` of
    uniform sampling (1 for design terms, whose remainder already shrinks). ``n_eff``: for a weighted mean of
    terms, ``(sum w)^2 / sum w^2``, with ``s2 = n_eff`` times the weighted mean's CLT variance (default n).

    ``unit_mean``: the estimate rescaled to [0, 1]; given, the floor is scaled by the Bernoulli bound at the
    smoothed mean, ``4 m (1 - m)`` with ``m = (n unit_mean + 1) / (n + 2)`` (a bounded score's variance is at
    most ``m (1 - m) span^2``, Bhatia & Davis 2000): near the ends of the range the floor shrinks as the
    variance can, never to 0.

    ``guard`` > 0 adds an outer guard by an anytime-valid confidence sequence of half-width
    ``guard_half_width``: the half-width is at least ``guard_half_width / guard``, so a precision stop at
    ``h`` also needs the confidence sequence within ``guard * h`` (measured, docs/RESULTS.md "Precision
    stops valid at the stop")."""
    if n < 2:
        return math.inf
    denominator = float(n if n_eff is None else n_eff)
    floor = span * span / n
    if unit_mean is not None:
        m = (n * min(max(unit_mean, 0.0), 1.0) + 1.0) / (n + 2.0)
        floor *= 4.0 * m * (1.0 - m)
    half = _normal_quantile(0.5 + level / 2.0) * math.sqrt(max(fpc, 0.0) * (max(s2, 0.0) + floor) / denominator)
    if guard > 0 and guard_half_width is not None:
        half = max(half, guard_half_width / guard)
    return float(half)


def interval_at(estimator: Any, level: float, score_range: tuple[float, float]) -> tuple[float, float]:
    """The estimator's ``level`` interval, inside the score range."""
    own = getattr(estimator, "interval", None)
    lo, hi = own(level) if callable(own) else normal_interval(estimator.estimate, estimator.variance, level)
    return clip_interval(float(lo), float(hi), score_range)


def resolve_max_items(max_items: Any, n_items: int) -> int | None:
    """``max_items`` as an int: given as one, or ``{"fraction": f}`` of the benchmark (ceil, >= 1)."""
    if max_items is None:
        return None
    if isinstance(max_items, dict):
        if set(max_items) != {"fraction"}:
            raise ValueError('max_items: give an integer or {"fraction": f} with 0 < f <= 1')
        f = max_items["fraction"]
        if not _is_real(f) or not 0.0 < float(f) <= 1.0:
            raise ValueError(f"max_items.fraction: must be a number with 0 < f <= 1, got {f!r}")
        return max(1, math.ceil(float(f) * n_items - 1e-9))
    if isinstance(max_items, bool) or not isinstance(max_items, numbers.Integral) or int(max_items) < 1:
        raise ValueError(f"max_items: must be an integer >= 1 or {{\"fraction\": f}}, got {max_items!r}")
    return int(max_items)


class BettingCS:
    """Hedged-capital betting confidence sequence for a finite population mean, sampling without
    replacement (Waudby-Smith & Ramdas 2023, Thm 3 / §5; ``confseq.betting.hedged_cs`` defaults:
    theta = 1/2, truncation 1/2, predictable-mixture bets with prior mean 1/2, variance 1/4, one fake
    observation, a grid of ``breaks`` + 1 candidate means, running intersection and the logical CS).

    Scores are mapped from ``score_range`` to [0, 1]; ``interval()`` maps back. O(breaks) per
    observation.
    """

    def __init__(self, n_items: int, level: float = DEFAULT_LEVEL,
                 score_range: tuple[float, float] = (0.0, 1.0), breaks: int = 1000) -> None:
        lo, hi = float(score_range[0]), float(score_range[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
            raise ValueError("score_range: a betting confidence sequence needs finite bounds lo < hi")
        self.N = int(n_items)
        self.alpha = 1.0 - check_level(level)
        self.lo, self.scale = lo, hi - lo
        self.breaks = int(breaks)
        self.grid = np.arange(0, 1 + 1 / self.breaks, step=1 / self.breaks)
        self._log_pos = np.zeros(self.grid.shape[0])
        self._log_neg = np.zeros(self.grid.shape[0])
        self._alive = np.ones(self.grid.shape[0], dtype=bool)  # m never excluded by mu_t outside [0, 1]
        self.t = 0
        self._S = 0.0
        self._sum_sq = 0.0  # sum_i (x_i - mu_hat_i)^2 (confseq's regularized variance numerator)
        self._mu_hat = 0.5  # mu_hat_{t-1}
        self._sigma2 = 0.25  # sigma2_{t-1}
        self._l, self._u = 0.0, 1.0
        self._log_threshold = math.log(1.0 / self.alpha)

    def update(self, score: float) -> None:
        x = min(max((float(score) - self.lo) / self.scale, 0.0), 1.0)
        t = self.t + 1
        a_half = self.alpha / 2.0
        lam = math.sqrt(2.0 * math.log(1.0 / a_half) / (t * math.log(1.0 + t) * self._sigma2))
        remaining = self.N - (t - 1)
        mu = (self.N * self.grid - self._S) / remaining if remaining > 0 else self.grid.copy()
        self._alive &= (mu >= 0.0) & (mu <= 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = np.maximum(np.minimum(lam, 0.5 / mu), -0.5 / (1.0 - mu))
            ln = np.maximum(np.minimum(lam, 0.5 / (1.0 - mu)), -0.5 / mu)
            mp = 1.0 + lp * (x - mu)
            mn = 1.0 - ln * (x - mu)
            self._log_pos += np.where(self._alive, np.log(np.maximum(mp, 1e-300)), 0.0)
            self._log_neg += np.where(self._alive, np.log(np.maximum(mn, 1e-300)), 0.0)
        self.t = t
        self._S += x
        mu_hat_t = min((0.5 + self._S) / (t + 1), 1.0)
        self._sum_sq += (x - mu_hat_t) ** 2
        self._sigma2 = (0.25 + self._sum_sq) / (t + 1)
        self._mu_hat = mu_hat_t
        log_half = math.log(0.5)
        cap = np.maximum(log_half + self._log_pos, log_half + self._log_neg)
        inside = self._alive & (cap <= self._log_threshold)
        where = np.flatnonzero(inside)
        if where.size:
            l, u = float(self.grid[where[0]]), float(self.grid[where[-1]])
        else:
            l, u = 0.0, 1.0
        l, u = max(0.0, l - 1 / self.breaks), min(1.0, u + 1 / self.breaks)
        l, u = max(l, self._S / self.N), min(u, 1.0 - (t - self._S) / self.N)  # logical CS
        self._l, self._u = max(self._l, l), min(self._u, u)  # running intersection

    def interval(self) -> tuple[float, float]:
        """The current confidence set in score units."""
        return self.lo + self.scale * self._l, self.lo + self.scale * self._u


class PrecisionSession:
    """Any sequential estimator, with the session's ``level``, score range and (optional) precision
    rule on top. The estimator keeps its own rule (e.g. BayesAME's) only when ``rule`` is None.

    With ``rule.anytime_valid`` the proposals are uniform random without replacement and ``ci`` is
    the ``BettingCS`` at ``rule.level`` (the estimate is the estimator's, clipped into the CS).
    """

    def __init__(self, estimator: Any, *, level: float = DEFAULT_LEVEL, rule: StopRule | None = None,
                 score_range: tuple[float, float] = (-math.inf, math.inf), seed: int = 0,
                 batch_size: int = 1, max_items: int | None = None) -> None:
        self.inner = estimator
        self.rule = rule
        self.level = rule.level if rule is not None else check_level(level)
        self.score_range = (float(score_range[0]), float(score_range[1]))
        self.n_items = int(estimator.n_items)
        self.seed = int(seed)
        self.batch_size = int(batch_size)
        self.max_items = max_items
        # a design-based estimator (``anytime_valid = True``: active_design) is anytime-valid itself
        native = bool(getattr(estimator, "anytime_valid", False))
        self.cs = (BettingCS(self.n_items, self.level, self.score_range)
                   if rule is not None and rule.anytime_valid and not native else None)
        self._observed = np.zeros(self.n_items, dtype=bool)
        self._stop_reason: str | None = None
        self.trajectory: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ state
    @property
    def n_observed(self) -> int:
        return int(self.inner.n_observed)

    @property
    def hyperparameters(self) -> Any:
        return self.inner.hyperparameters

    @property
    def variance(self) -> float:
        return float(self.inner.variance)

    @property
    def estimate(self) -> float:
        """The estimator's estimate, projected onto the score range (and into the CS when there is one)."""
        lo, hi = self.cs.interval() if self.cs is not None and self.cs.t else self.score_range
        return float(min(max(float(self.inner.estimate), lo), hi))

    @property
    def ci(self) -> tuple[float, float]:
        if self.cs is not None and self.cs.t:
            return self.cs.interval()
        return interval_at(self.inner, self.level, self.score_range)

    @property
    def stopped(self) -> bool:
        return self._stop_reason is not None or bool(self.inner.stopped)

    @property
    def stop_reason(self) -> str | None:
        return self._stop_reason or (self.inner.stop_reason if self.inner.stopped else None)

    @property
    def half_width(self) -> float:
        lo, hi = self.ci
        return (hi - lo) / 2.0

    # ------------------------------------------------------------------ propose / observe
    def propose(self) -> list[int]:
        if self.stopped:
            return []
        if self.cs is None:
            return [int(i) for i in self.inner.propose()]
        left = self.n_items - self.n_observed
        if self.max_items is not None:
            left = min(left, self.max_items - self.n_observed)
        k = min(self.batch_size, max(left, 0))
        if k <= 0:
            return []
        rng = np.random.default_rng([self.seed, self.n_observed, 7])
        return [int(i) for i in rng.choice(np.flatnonzero(~self._observed), size=k, replace=False)]

    def observe(self, item: int, score: float) -> None:
        if self.stopped:
            raise ValueError(f"item: session stopped ({self.stop_reason}); no more observations")
        self.inner.observe(item, score)
        self._observed[int(item)] = True
        if self.cs is not None:
            self.cs.update(score)
        lo, hi = self.ci
        point = {"n": self.n_observed, "estimate": self.estimate, "variance": self.variance, "ci": [lo, hi]}
        inner = getattr(self.inner, "trajectory", None)
        if inner and "probability" in inner[-1]:  # a design-based estimator records its draw's probability
            point["probability"] = inner[-1]["probability"]
        self.trajectory.append(point)
        rule = self.rule
        if (rule is not None and rule.half_width > 0 and self.n_observed >= rule.min_items
                and (hi - lo) / 2.0 <= rule.half_width):
            self._stop_reason = "precision"
