"""The session methods: name -> estimator class (one table feeds validation, the API's enum, the
CLI and the backtests). ``DEFAULT_METHOD`` is what a session without ``method`` gets."""

from __future__ import annotations

from typing import Any

from .config import BAYESAME_METHODS, METHODS, SessionConfig
from .estimator import SequentialEstimator
from .fluid_irt import FluidIRTEstimator
from .prior import BucketPrior
from .proeval_bq import ProEvalBQEstimator
from .refgp import RefGPEstimator
from .refgp_dr import RefGPDREstimator
from .refgp_v2 import RefGPV2Estimator
from .refgp_v3 import RefGPCalEstimator, RefGPV3Estimator

DEFAULT_METHOD = "refgp_v3"
ESTIMATORS: dict[str, Any] = {
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
__all__ = ["BAYESAME_METHODS", "DEFAULT_METHOD", "ESTIMATORS", "make_estimator"]


def make_estimator(prior: BucketPrior, config: SessionConfig) -> Any:
    """A fresh single-target estimator of ``config.method``."""
    config.validate()
    return ESTIMATORS[config.method](prior, config)
