"""The session methods: name -> estimator factory ``(prior, config)``, a class or a preset of one (one table
feeds validation, the API's enum, the
CLI and the backtests). ``DEFAULT_METHOD`` is what a session without ``method`` gets."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from .active_design import ActiveDesignEstimator
from .config import (
    ACTIVE_DESIGN_PARAMS,
    BAYESAME_METHODS,
    INTERVAL_KINDS,
    METHODS,
    PUBLIC_METHODS,
    REFGP_CHOICES,
    REFGP_VARIANTS,
    SessionConfig,
    refgp_params,
)
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
#: the multi-target default (the joint LMC model of papers/004 §3.2 is built on BayesAME's buckets)
DEFAULT_MULTI_TARGET_METHOD = "bayesame"
MULTI_TARGET_METHODS = ("bayesame", "bayesame_rs")


@dataclass(frozen=True)
class MethodSpec:
    """One public session method as the service offers it (``GET /v1/sessions/methods``)."""

    name: str
    summary: str
    params: tuple[str, ...]  # the keys its ``method_params`` take (empty: none)
    multi_target: bool  # usable with ``targets``
    interval_kinds: tuple[str, ...]  # the ``interval_kind`` values it takes (empty: the field is refused)
    takes_hyperparameters: bool
    only_proposed_items: bool  # an item it did not propose is 409 (issue 32 item 9)


METHOD_SPECS: dict[str, MethodSpec] = {s.name: s for s in (
    MethodSpec("active_design", "the default: items drawn at random with recorded probabilities, a working model's "
               "prediction plus inverse-probability-weighted residuals, an anytime-valid confidence sequence",
               tuple(ACTIVE_DESIGN_PARAMS), False, INTERVAL_KINDS, False, False),
    MethodSpec("bayesame", "papers/004 exactly (BayesAME), with the paper's stopping rule by default", (), True, (),
               True, False),
    MethodSpec("bayesame_rs", "papers/004's bucket model with uniform random items", (), True, (), True, False),
    MethodSpec("rs_mean", "papers/004's random-sampling baseline (sample mean, normal interval)", (), False, (), True,
               False),
    MethodSpec("random", "uniform items, sample mean, exact finite-population interval", (), False, (), False, True),
    MethodSpec("refgp", "the reference-score GP family; its variant in method_params", tuple(sorted(REFGP_CHOICES))
               + ("directions",), False, (), False, False),
    MethodSpec("proeval_bq", "ProEval's Bayesian quadrature (BQ-SF)", (), False, (), False, False),
    MethodSpec("fluid_irt", "Fluid Benchmarking (IRT ability, Fisher-information selection)", (), False, (), False,
               False),
)}
assert set(METHOD_SPECS) == set(PUBLIC_METHODS)


def method_table() -> dict[str, Any]:
    """The session methods as JSON (``GET /v1/sessions/methods``, the ``Link`` of a former name's ``Deprecation``
    header): the defaults, one entry per public method, and the former names with what they resolve to."""
    return {
        "default": DEFAULT_METHOD, "default_multi_target": DEFAULT_MULTI_TARGET_METHOD,
        "methods": [{"name": s.name, "summary": s.summary, "method_params": list(s.params),
                     "multi_target": s.multi_target, "interval_kinds": list(s.interval_kinds),
                     "hyperparameters": s.takes_hyperparameters, "only_proposed_items": s.only_proposed_items}
                    for s in METHOD_SPECS.values()],
        "deprecated": [{"name": old, "method": name, "method_params": dict(params),
                        "note": f"a former name: give method {name!r} with these method_params"}
                       for old, (name, params) in ALIASES.items()],
    }


__all__ = ["ALIASES", "BAYESAME_METHODS", "DEFAULT_METHOD", "DEFAULT_MULTI_TARGET_METHOD", "ESTIMATORS",
           "METHOD_SPECS", "PUBLIC_METHODS", "make_estimator", "method_table"]


def make_estimator(prior: BucketPrior, config: SessionConfig,
                   score_range: tuple[float, float] | None = None) -> Any:
    """A fresh single-target estimator of ``config.method`` (``score_range``: the benchmark's bounds, read
    by the design-based methods)."""
    config.validate()
    cls = ESTIMATORS[config.method]
    if cls is ActiveDesignEstimator:
        return cls(prior, config, score_range=score_range, **(config.method_params or {}))
    return cls(prior, config)
