"""The session methods: name -> estimator class (one table feeds validation, the API's enum, the
CLI and the backtests). ``DEFAULT_METHOD`` is what a session without ``method`` gets."""

from __future__ import annotations

from typing import Any

from .active_design import ActiveDesignEstimator
from .config import BAYESAME_METHODS, METHODS, PUBLIC_METHODS, REFGP_VARIANTS, SessionConfig, refgp_variant
from .estimator import SequentialEstimator
from .fluid_irt import FluidIRTEstimator
from .prior import BucketPrior
from .proeval_bq import ProEvalBQEstimator
from .random_sampling import RandomEstimator
from .refgp import RefGPEstimator
from .refgp_dr import RefGPDREstimator
from .refgp_v2 import RefGPV2Estimator
from .refgp_v3 import RefGPCalEstimator, RefGPV3Estimator

DEFAULT_METHOD = "active_design"


def refgp(prior: BucketPrior, config: SessionConfig) -> Any:
    """The reference-score GP family: the member named by ``config.method_params`` (``mean``, ``variance``,
    ``selection``, ``directions``; missing keys: refgp_v3's). The members are still separate classes inside
    (docs/SEQUENTIAL.md: merging them into one class is left to do); the parameters are the public surface."""
    return ESTIMATORS[refgp_variant(config.method_params)](prior, config)


ESTIMATORS: dict[str, Any] = {
    "active_design": ActiveDesignEstimator,  # the default: random design, model-assisted, anytime-valid interval
    "random": RandomEstimator,  # uniform items, sample mean, exact finite-population interval
    "refgp": refgp,  # the reference-score GP family, its variant a parameter set (REFGP_VARIANTS)
    "refgp_v3": RefGPV3Estimator,  # the default: refgp_v2 / refgp_ivr means averaged, variance calibrated
    "refgp_cal": RefGPCalEstimator,  # refgp_ivr with the variance calibrated on the references
    "refgp_v2": RefGPV2Estimator,  # refgp_ivr + logit-shift prior mean (docs/SEQUENTIAL.md; not the default)
    "refgp_ivr": RefGPEstimator,  # the previous default (docs/SEQUENTIAL.md)
    "refgp_dr": RefGPDREstimator,  # random items, refgp_ivr's model assists, difference estimator's variance
    "bayesame": SequentialEstimator,  # papers/004
    "bayesame_rs": SequentialEstimator,
    "rs_mean": SequentialEstimator,
    "proeval_bq": ProEvalBQEstimator,  # google-deepmind/proeval BQ-SF
    "fluid_irt": FluidIRTEstimator,  # allenai/fluid-benchmarking
}

assert tuple(ESTIMATORS) == METHODS
#: former names -> (public name, parameters): still accepted, answered with the public name (API: Deprecation header)
ALIASES: dict[str, tuple[str, dict[str, Any]]] = {old: ("refgp", dict(p)) for old, p in REFGP_VARIANTS.items()}
__all__ = ["ALIASES", "BAYESAME_METHODS", "DEFAULT_METHOD", "ESTIMATORS", "PUBLIC_METHODS", "make_estimator"]


def make_estimator(prior: BucketPrior, config: SessionConfig,
                   score_range: tuple[float, float] | None = None) -> Any:
    """A fresh single-target estimator of ``config.method`` (``score_range``: the benchmark's bounds, read
    by the design-based methods)."""
    config.validate()
    cls = ESTIMATORS[config.method]
    if cls is ActiveDesignEstimator:
        return cls(prior, config, score_range=score_range, **(config.method_params or {}))
    return cls(prior, config)
