"""The session methods: name -> estimator factory ``(prior, config)``, a class or a preset of one (one table
feeds validation, the API's enum, the
CLI and the backtests). ``DEFAULT_METHOD`` is what a session without ``method`` gets."""

from __future__ import annotations

from functools import partial
from typing import Any

from .active_design import ActiveDesignEstimator
from .config import BAYESAME_METHODS, METHODS, PUBLIC_METHODS, REFGP_VARIANTS, SessionConfig, refgp_params
from .estimator import SequentialEstimator
from .fluid_irt import FluidIRTEstimator
from .prior import BucketPrior
from .proeval_bq import ProEvalBQEstimator
from .random_sampling import RandomEstimator
from .refgp import RefGPEstimator

DEFAULT_METHOD = "active_design"


def refgp(prior: BucketPrior, config: SessionConfig) -> RefGPEstimator:
    """The reference-score GP family: one class, :class:`~.refgp.RefGPEstimator`, with the parameters
    ``config.method_params`` (``mean``, ``variance``, ``selection``, ``directions``; missing keys: refgp_v3's).
    A preset's parameters (``REFGP_VARIANTS``) give exactly its former method; other combinations run too."""
    return RefGPEstimator(prior, config, **refgp_params(config.method_params))


def _preset(name: str) -> Any:
    """The estimator factory ``(prior, config)`` of the refgp preset ``name`` (a former method name)."""
    return partial(RefGPEstimator, **REFGP_VARIANTS[name])


ESTIMATORS: dict[str, Any] = {
    "active_design": ActiveDesignEstimator,  # the default: random design, model-assisted, anytime-valid interval
    "random": RandomEstimator,  # uniform items, sample mean, exact finite-population interval
    "refgp": refgp,  # the reference-score GP family: one class, its components parameters (method_params)
    # the family's presets under their former names (aliases of refgp + REFGP_VARIANTS[name]):
    "refgp_v3": _preset("refgp_v3"),  # refgp_v2 / refgp_ivr means averaged by evidence, variance calibrated
    "refgp_cal": _preset("refgp_cal"),  # refgp_ivr with the variance calibrated on the references
    "refgp_v2": _preset("refgp_v2"),  # refgp_ivr + logit-shift prior mean, 64 directions, wide floor
    "refgp_ivr": _preset("refgp_ivr"),  # reference mean, model variance, integral variance reduction
    "refgp_dr": _preset("refgp_dr"),  # random items, refgp_ivr's model assists, difference estimator's variance
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
