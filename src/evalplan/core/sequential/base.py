"""Shared bookkeeping of the single-target sequential estimators (BayesAME / ``bayesame_rs`` /
``rs_mean``, ``refgp_ivr``, ``proeval_bq``, ``fluid_irt``): the checked observation, the observed set,
the trajectory, the batch budget and the stopping rule (papers/004 App. C.1).

Every estimator exposes the same interface as :class:`~evalplan.core.sequential.SequentialEstimator`:
``estimate`` (the benchmark mean), ``variance`` (of that mean), ``interval(level)``, ``ci`` (the
95% interval), ``propose()`` (the next batch of item indices), ``observe(item, score)``,
``hyperparameters``, ``trajectory``, ``stopped`` / ``stop_reason`` and ``n_observed``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.stats import norm

from .config import SessionConfig
from .hyper import _CONTROLLER
from .prior import BucketPrior


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Small dense LAPACK/BLAS calls run much faster on one thread, above all on a loaded machine."""
    if _CONTROLLER is None:
        yield
        return
    with _CONTROLLER.limit(limits=1, user_api="blas"):
        yield


def z_of(level: float) -> float:
    """Two-sided normal quantile of ``level`` (0.95 -> 1.95996...); memoized (scipy's ``ppf`` costs
    about 0.1 ms a call, and every observation asks for it)."""
    return _z_of(float(level))


@lru_cache(maxsize=256)
def _z_of(level: float) -> float:
    return float(norm.ppf(0.5 + 0.5 * level))


def checked_score(score: object) -> float:
    """``score`` as a finite float; ValueError naming the field otherwise."""
    try:
        s = float(score)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"score: must be a number, got {score!r}") from None
    if not math.isfinite(s):
        raise ValueError(f"score: must be finite, got {score!r}")
    return s


def checked_item(est: Any, item: object) -> int:
    """``item`` as an index ``est`` (a session estimator) can still observe; ValueError naming the field
    otherwise (stopped session, not an integer, out of range, already observed)."""
    if est.stopped:
        raise ValueError(f"item: session stopped ({est.stop_reason}); no more observations")
    if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
        raise ValueError(f"item: must be an integer index, got {item!r}")
    index = int(item)
    if not 0 <= index < est.n_items:
        raise ValueError(f"item: {index} out of range [0, {est.n_items})")
    if est._observed[index]:
        raise ValueError(f"item: {index} already observed")
    return index


def derived(prior: BucketPrior, key: str) -> Any:
    """A per-prior cache for derived arrays (features, IRT fits), shared by every session of the prior."""
    store: dict[str, Any] | None = getattr(prior, "_derived_cache", None)
    if store is None:
        store = {}
        prior._derived_cache = store  # type: ignore[attr-defined]
    return store.get(key)


def store_derived(prior: BucketPrior, key: str, value: Any) -> Any:
    derived(prior, key)
    prior._derived_cache[key] = value  # type: ignore[attr-defined]
    return value


def paper_converged(history: list[float], window: int, interval_width: float, config: SessionConfig) -> bool:
    """papers/004 App. C.1's convergence test, the one place it is written: over the last ``window`` iterations
    the estimate moved <= ``epsilon1`` and the interval is <= ``epsilon2`` wide. Callers: :func:`paper_stop`
    (BayesAME and the single-target estimators, the paper's 95% normal interval), ``active_design`` (its own
    interval) and the multi-target estimator (per target)."""
    if len(history) < window:
        return False
    last = history[-window:]
    return max(last) - min(last) <= config.epsilon1 and interval_width <= config.epsilon2


def paper_stop(est: Any) -> None:
    """papers/004 App. C.1 stopping (as ``SequentialEstimator._check_stop``): over the last W iterations
    the estimate moved <= eps1 and the 95% interval is <= eps2 wide; else ``max_items`` /
    ``exhausted``. Sets ``stopped``/``stop_reason``."""
    cfg = est.config
    n = est.n_observed
    if cfg.stop is None and n % cfg.batch_size == 0:  # a ``stop`` rule replaces it (stopping.PrecisionSession)
        est._iter_estimates.append(est.estimate)
        if paper_converged(est._iter_estimates, cfg.effective_window, 2.0 * z_of(0.95) * math.sqrt(est.variance), cfg):
            est.stopped, est.stop_reason = True, "converged"
            return
    if cfg.max_items is not None and n >= cfg.max_items:
        est.stopped, est.stop_reason = True, "max_items"
    elif n >= est.n_items:
        est.stopped, est.stop_reason = True, "exhausted"


class ItemEstimator(ABC):
    """Base of the single-target session estimators (BayesAME's bucket model included): the subclass
    supplies ``_select``, ``_update`` and ``_set_estimate``; this class does the rest."""

    method: str = ""

    def __init__(self, prior: BucketPrior, config: SessionConfig) -> None:
        if not isinstance(prior, BucketPrior):
            raise ValueError("prior: must be a BucketPrior")
        if not isinstance(config, SessionConfig):
            raise ValueError("config: must be a SessionConfig")
        config.validate()
        self.prior = prior
        self.config = config
        self.n_items = prior.n_items
        self._observed = np.zeros(self.n_items, dtype=bool)
        self._items: list[int] = []
        self._scores: list[float] = []
        self._sum_s = 0.0
        self.n_observed = 0
        self.stopped = False
        self.stop_reason: str | None = None
        self.trajectory: list[dict[str, Any]] = []
        self._iter_estimates: list[float] = []
        self.n_refits = 0
        self.estimate = 0.0
        self.variance = 0.0

    # ------------------------------------------------------------------ public state
    @property
    def hyperparameters(self) -> dict[str, Any] | None:
        return None

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        half = z_of(level) * math.sqrt(max(self.variance, 0.0))
        return (self.estimate - half, self.estimate + half)

    @property
    def ci(self) -> tuple[float, float]:
        return self.interval(0.95)

    @property
    def observed_items(self) -> list[int]:
        return list(self._items)

    # ------------------------------------------------------------------ the estimator's own parts
    @abstractmethod
    def _select(self, k: int) -> list[int]:
        """``k`` distinct unobserved item indices to evaluate next."""

    @abstractmethod
    def _update(self, item: int, score: float) -> None:
        """Condition on one new observation (``_observed`` and the score lists are updated after)."""

    @abstractmethod
    def _set_estimate(self) -> None:
        """Set ``estimate`` and ``variance`` (of the benchmark mean) from the current state."""

    # ------------------------------------------------------------------ propose / observe
    def _remaining_budget(self) -> int:
        left = self.n_items - self.n_observed
        if self.config.max_items is not None:
            left = min(left, self.config.max_items - self.n_observed)
        return max(left, 0)

    def propose(self) -> list[int]:
        if self.stopped:
            return []
        k = min(self.config.batch_size, self._remaining_budget())
        return self._select(k) if k > 0 else []

    def observe(self, item: int, score: float) -> None:
        item = checked_item(self, item)
        s = checked_score(score)
        self._update(item, s)
        self._observed[item] = True
        self._items.append(item)
        self._scores.append(s)
        self._sum_s += s
        self.n_observed += 1
        self._after_observe()
        self._set_estimate()
        lo, hi = self.ci
        self.trajectory.append({"n": self.n_observed, "estimate": self.estimate,
                                "variance": self.variance, "ci": [lo, hi]})
        self._check_stop()

    def _after_observe(self) -> None:
        """Hook run after the observation is recorded (hyperparameter refits); nothing by default."""
        return None

    def _check_stop(self) -> None:
        paper_stop(self)
