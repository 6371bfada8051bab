"""Session configuration for sequential (BayesAME) evaluation (papers/004, §3.1, App. C.1)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from .stopping import DEFAULT_LEVEL, StopRule, check_level

METHODS = ("active_design", "random", "refgp", "refgp_v3", "refgp_cal", "refgp_v2", "refgp_ivr", "refgp_dr", "bayesame",
           "bayesame_rs", "rs_mean", "proeval_bq", "fluid_irt")
# the public names (docs/SEQUENTIAL.md); the others are the refgp family's former names, kept as aliases
PUBLIC_METHODS = ("active_design", "bayesame", "bayesame_rs", "rs_mean", "random", "proeval_bq", "fluid_irt", "refgp")
# the reference-score GP family: one name and one class (refgp.RefGPEstimator); its parameters (mean, variance,
# selection, directions) combine freely, except that a design-based variance needs random items. The presets:
REFGP_VARIANTS: dict[str, dict[str, Any]] = {
    "refgp_ivr": {"mean": "reference", "variance": "model", "selection": "ivr", "directions": 16},
    "refgp_v2": {"mean": "logit_shift", "variance": "model", "selection": "ivr", "directions": 64},
    "refgp_v3": {"mean": "evidence_mix", "variance": "calibrated", "selection": "ivr", "directions": 64},
    "refgp_cal": {"mean": "reference", "variance": "calibrated", "selection": "ivr", "directions": 16},
    "refgp_dr": {"mean": "reference", "variance": "design_loo", "selection": "random", "directions": 16},
}
REFGP_DEFAULT = "refgp_v3"
REFGP_CHOICES: dict[str, tuple[str, ...]] = {
    "mean": ("reference", "logit_shift", "evidence_mix"),
    "variance": ("model", "calibrated", "design_loo"),
    "selection": ("ivr", "random"),
}
REFGP_DIRECTIONS = (1, 128)  # the allowed range of ``directions`` (reference directions kept as features)
ACTIVE_DESIGN_PARAMS = {"uniform_share": float, "extrapolation_share": float, "working_model": str, "point": str,
                        "adaptive_share": bool}


def refgp_params(params: dict[str, Any] | None) -> dict[str, Any]:
    """The full, checked parameter set ``{mean, variance, selection, directions}`` of a refgp session:
    ``params`` over the default's (``REFGP_DEFAULT``); ValueError naming ``method_params.<key>`` otherwise."""
    given = dict(params or {})
    keys = sorted(REFGP_VARIANTS[REFGP_DEFAULT])
    unknown = [k for k in given if k not in keys]
    if unknown:
        raise ValueError(f"method_params.{unknown[0]}: unknown key for refgp (allowed: {', '.join(keys)})")
    full = {**REFGP_VARIANTS[REFGP_DEFAULT], **given}
    for key, allowed in REFGP_CHOICES.items():
        if not isinstance(full[key], str) or full[key] not in allowed:
            raise ValueError(f"method_params.{key}: must be one of {', '.join(allowed)}, got {full[key]!r}")
    lo, hi = REFGP_DIRECTIONS
    if not _is_int(full["directions"]) or not lo <= full["directions"] <= hi:
        raise ValueError(f"method_params.directions: must be an integer in [{lo}, {hi}], got {full['directions']!r}")
    if full["variance"] == "design_loo" and full["selection"] != "random":
        raise ValueError("method_params.variance: design_loo (the difference estimator's design-based variance) "
                         f"needs selection random, got selection {full['selection']!r}")
    return full


def refgp_variant(params: dict[str, Any] | None) -> str | None:
    """The preset (former method name) whose parameters are ``params`` (missing keys: the default's), or None
    for another combination; ValueError naming ``method_params`` for an invalid set (:func:`refgp_params`)."""
    full = refgp_params(params)
    for name, variant in REFGP_VARIANTS.items():
        if variant == full:
            return name
    return None


BAYESAME_METHODS = ("bayesame", "bayesame_rs", "rs_mean")  # the methods that take hyperparameters
DESIGN_METHODS = ("active_design",)  # the methods with a design-based interval (interval_kind)
INTERVAL_KINDS = ("sequential", "anytime", "fixed_n")  # active_design.INTERVAL_KINDS; sequential the default
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
    previous: list[dict[str, Any]] | None = None  # earlier checkpoints (core.sequential.checkpoints)
    interval_kind: str | None = None  # active_design: "sequential" (default), "anytime" or "fixed_n" (fixed n only)
    method_params: dict[str, Any] | None = None  # refgp: its variant's parameters; active_design: its own
    compare: dict[str, Any] | None = None  # a paired session (core.paired.PairedSession): {to, kind, model, delta}

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
        mp = self.method_params
        if mp is not None:
            if not isinstance(mp, dict):
                raise ValueError("method_params: must be an object")
            if self.method == "refgp":
                refgp_params(mp)
            elif self.method == "active_design":
                for k, v in mp.items():
                    kind = ACTIVE_DESIGN_PARAMS.get(k)
                    if kind is None:
                        raise ValueError(f"method_params.{k}: unknown key for active_design (allowed: "
                                         f"{', '.join(ACTIVE_DESIGN_PARAMS)})")
                    ok = isinstance(v, bool) if kind is bool else (
                        _is_real(v) if kind is float else isinstance(v, str))
                    if not ok:
                        raise ValueError(f"method_params.{k}: must be a {kind.__name__}, got {v!r}")
                    if k.endswith("_share") and not 0.0 < float(v) <= 1.0:
                        raise ValueError(f"method_params.{k}: must be in (0, 1], got {v!r}")
                    allowed = {"working_model": ("refgp_ivr", "refgp_v3"), "point": ("model", "design", "compromise")}
                    if k in allowed and v not in allowed[k]:
                        raise ValueError(f"method_params.{k}: must be one of {allowed[k]}, got {v!r}")
                shares = (float(mp.get("uniform_share", 0.25)), float(mp.get("extrapolation_share", 0.6)))
                if shares[0] > shares[1]:
                    raise ValueError("method_params.extrapolation_share: must be >= uniform_share")
            else:
                raise ValueError(f"method_params: apply to refgp and active_design only, not {self.method}")
        if self.compare is not None and self.method != "random":
            raise ValueError(f"method: a paired session (compare_to) draws its items at random; give method "
                             f"random or none, not {self.method!r}")
        if self.interval_kind is not None:
            if self.method not in DESIGN_METHODS:
                raise ValueError(f"interval_kind: applies to {', '.join(DESIGN_METHODS)} only")
            if self.interval_kind not in INTERVAL_KINDS:
                raise ValueError(f"interval_kind: must be one of {INTERVAL_KINDS}, got {self.interval_kind!r}")
            rule = None if self.stop is None else StopRule.from_dict(self.stop)
            if self.interval_kind == "fixed_n" and rule is not None and rule.half_width > 0:
                raise ValueError("interval_kind: fixed_n is valid at a fixed budget only, not at a precision stop "
                                 "(stop.half_width > 0); use anytime")
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
