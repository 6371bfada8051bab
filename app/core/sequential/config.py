"""Session configuration for sequential (BayesAME) evaluation (papers/004, §3.1, App. C.1)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from .stopping import DEFAULT_LEVEL, StopRule, check_level

METHODS = ("refgp_v3", "refgp_cal", "refgp_v2", "refgp_ivr", "refgp_dr", "bayesame", "bayesame_rs", "rs_mean",
           "proeval_bq", "fluid_irt")
BAYESAME_METHODS = ("bayesame", "bayesame_rs", "rs_mean")  # the methods that take hyperparameters
HYPERPARAMETER_KEYS = ("alpha", "beta", "sigma2")


def _is_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _is_real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


@dataclass(frozen=True)
class SessionConfig:
    """Defaults are the paper's (App. C.1): eps1=0.005, eps2=0.02, W=30, F=50, N0=10."""

    method: str = "bayesame"  # one of METHODS (the API's default when omitted is methods.DEFAULT_METHOD)
    epsilon1: float = 0.005
    epsilon2: float = 0.02
    window: int = 30
    refit_every: int = 50  # 0 = never refit
    max_items: int | None = None
    batch_size: int = 1
    hyperparameters: dict[str, float] | None = None  # {"alpha", "beta", "sigma2"} (any subset)
    seed: int = 0
    n0: int = 10
    stop: dict[str, Any] | None = None  # StopRule.as_dict(); None = the method's own rule (BayesAME's)
    level: float = DEFAULT_LEVEL  # the level of the session's ci (= stop.level when stop is given)
    max_items_fraction: float | None = None  # as requested; max_items holds the resolved count
    previous: list[dict[str, Any]] | None = None  # earlier checkpoints in the prior (app.core.sequential.checkpoints)

    def validate(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method: must be one of {METHODS}, got {self.method!r}")
        for name in ("epsilon1", "epsilon2"):
            v = getattr(self, name)
            if not _is_real(v) or v < 0:
                raise ValueError(f"{name}: must be a finite number >= 0, got {v!r}")
        if not _is_int(self.window) or self.window < 1:
            raise ValueError(f"window: must be an integer >= 1, got {self.window!r}")
        if not _is_int(self.refit_every) or self.refit_every < 0:
            raise ValueError(f"refit_every: must be an integer >= 0, got {self.refit_every!r}")
        if self.max_items is not None and (not _is_int(self.max_items) or self.max_items < 1):
            raise ValueError(f"max_items: must be None or an integer >= 1, got {self.max_items!r}")
        if not _is_int(self.batch_size) or self.batch_size < 1:
            raise ValueError(f"batch_size: must be an integer >= 1, got {self.batch_size!r}")
        if not _is_int(self.seed) or self.seed < 0:
            raise ValueError(f"seed: must be an integer >= 0, got {self.seed!r}")
        if not _is_int(self.n0) or self.n0 < 0:
            raise ValueError(f"n0: must be an integer >= 0, got {self.n0!r}")
        check_level(self.level)
        if self.stop is not None:
            rule = StopRule.from_dict(self.stop)
            if "level" in self.stop and rule.level != float(self.level):
                raise ValueError(f"stop.level: {rule.level!r} differs from level {self.level!r}")
        hp = self.hyperparameters
        if hp is not None and self.method not in BAYESAME_METHODS:
            raise ValueError(f"hyperparameters: apply to {', '.join(BAYESAME_METHODS)} only; "
                             f"{self.method} learns its own")
        if hp is not None:
            if not isinstance(hp, dict):
                raise ValueError("hyperparameters: must be a dict with keys among alpha, beta, sigma2")
            for k, v in hp.items():
                if k not in HYPERPARAMETER_KEYS:
                    raise ValueError(f"hyperparameters: unknown key {k!r} (allowed: {HYPERPARAMETER_KEYS})")
                if not _is_real(v) or float(v) <= 0:
                    raise ValueError(f"hyperparameters: {k} must be a finite number > 0, got {v!r}")

    @property
    def stop_rule(self) -> StopRule | None:
        return None if self.stop is None else StopRule.from_dict(self.stop)

    @property
    def effective_window(self) -> int:
        """W = window / |A| (rounded, >= 1), App. C.1; counted in iterations (batches)."""
        return max(1, int(round(self.window / self.batch_size)))
