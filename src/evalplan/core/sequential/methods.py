"""The session methods: one spec per public method (``METHOD_SPECS``: its estimator factory, its typed
``method_params`` model, multi-target support, interval kinds), the former names (``config.FORMER_NAMES``:
aliases of a public method with fixed parameters) and the defaults. One table feeds validation, the API's
enum and ``GET /v1/sessions/methods``, the CLI and the backtests."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .active_design import EXTRAPOLATION_SHARE, UNIFORM_SHARE, WORKING_MODEL, ActiveDesignEstimator
from .config import (
    DEFAULT_METHOD,
    FORMER_NAMES,
    METHODS,
    PARAMS,
    PUBLIC_METHODS,
    ActiveDesignParams,
    BayesAMEParams,
    FluidIRTParams,
    MethodParams,
    ProEvalBQParams,
    RandomParams,
    RefGPParams,
    SessionConfig,
    hyperparameter_methods,
    resolve,
)
from .estimator import SequentialEstimator
from .fluid_irt import FluidIRTEstimator
from .prior import BucketPrior
from .proeval_bq import ProEvalBQEstimator
from .random_sampling import RandomEstimator
from .refgp import RefGPEstimator

ScoreRange = tuple[float, float] | None
#: ``(prior, config, params, score_range) -> estimator``: ``params`` the validated ``method_params``
Factory = Callable[[BucketPrior, SessionConfig, Any, ScoreRange], Any]


def _active_design(prior: BucketPrior, config: SessionConfig, params: ActiveDesignParams,
                   score_range: ScoreRange) -> ActiveDesignEstimator:
    return ActiveDesignEstimator(prior, config, score_range=score_range, **params.given())


def _random(prior: BucketPrior, config: SessionConfig, params: RandomParams, score_range: ScoreRange) -> Any:
    """``finite_population``: :class:`~.random_sampling.RandomEstimator`; ``paper_normal``: papers/004's RS-Mean
    (the bucket code's random draw, sample mean and normal interval; the former ``rs_mean``)."""
    if params.interval == "paper_normal":
        return SequentialEstimator(prior, config)
    return RandomEstimator(prior, config)


def _bayesame(prior: BucketPrior, config: SessionConfig, params: BayesAMEParams,
              score_range: ScoreRange) -> SequentialEstimator:
    return SequentialEstimator(prior, config)  # reads its selection from the config (estimator.bayesame_mode)


def _refgp(prior: BucketPrior, config: SessionConfig, params: RefGPParams, score_range: ScoreRange) -> RefGPEstimator:
    """The reference-score GP family: one class with the parameters ``mean``, ``variance``, ``selection``,
    ``directions`` (missing keys: refgp_v3's); a preset's parameters give exactly its former method."""
    return RefGPEstimator(prior, config, **params.full())


def _plain(cls: Any) -> Factory:
    return lambda prior, config, params, score_range: cls(prior, config)


@dataclass(frozen=True)
class MethodSpec:
    """One public session method (``GET /v1/sessions/methods``)."""

    name: str
    summary: str
    factory: Factory
    params: type[MethodParams]  # its ``method_params`` model (typed, extra keys refused; config.PARAMS)

    @property
    def multi_target(self) -> bool:
        """Usable with ``targets`` (the joint model of papers/004 §3.2)."""
        return self.params.multi_target

    @property
    def interval_kinds(self) -> tuple[str, ...]:
        """The ``interval_kind`` values it takes (empty: the field is refused)."""
        return self.params.interval_kinds


METHOD_SPECS: dict[str, MethodSpec] = {s.name: s for s in (
    MethodSpec("active_design", "the default: items drawn at random with recorded probabilities, a working model's "
               "prediction plus inverse-probability-weighted residuals, a sequential interval valid at the stop "
               "(or an anytime-valid confidence sequence)", _active_design, ActiveDesignParams),
    MethodSpec("random", "uniform items, sample mean, exact finite-population interval (interval paper_normal: "
               "papers/004's RS-Mean, the former rs_mean)", _random, RandomParams),
    MethodSpec("bayesame", "papers/004 exactly (BayesAME), with the paper's stopping rule by default (selection "
               "random: the former bayesame_rs)", _bayesame, BayesAMEParams),
    MethodSpec("refgp", "the reference-score GP family; its variant in method_params", _refgp, RefGPParams),
    MethodSpec("proeval_bq", "ProEval's Bayesian quadrature (BQ-SF)", _plain(ProEvalBQEstimator), ProEvalBQParams),
    MethodSpec("fluid_irt", "Fluid Benchmarking (IRT ability, Fisher-information selection)",
               _plain(FluidIRTEstimator), FluidIRTParams),
)}
assert tuple(METHOD_SPECS) == PUBLIC_METHODS and DEFAULT_METHOD in METHOD_SPECS
assert all(s.params is PARAMS[s.name] for s in METHOD_SPECS.values())
assert all(f.method in METHOD_SPECS for f in FORMER_NAMES.values())
_AD = ActiveDesignParams()  # the typed defaults are the estimator's
assert (_AD.uniform_share, _AD.extrapolation_share, _AD.working_model) == (UNIFORM_SHARE, EXTRAPOLATION_SHARE,
                                                                          WORKING_MODEL)

#: the multi-target default: the default method when it supports targets, else the table's first that does
DEFAULT_MULTI_TARGET_METHOD = next(s.name for s in sorted(METHOD_SPECS.values(),
                                                          key=lambda s: s.name != DEFAULT_METHOD) if s.multi_target)
#: the names usable with ``targets``: the multi-target methods and the former names of one
MULTI_TARGET_METHODS = tuple(n for n in METHODS if METHOD_SPECS[FORMER_NAMES[n].method if n in FORMER_NAMES
                                                                else n].multi_target)
#: former names -> (public name, parameters): accepted one more release with a ``Deprecation`` header
ALIASES: dict[str, tuple[str, dict[str, Any]]] = {old: (f.method, dict(f.params)) for old, f in FORMER_NAMES.items()}


def default_method(*, multi_target: bool = False, paired: bool = False) -> str:
    """The method of a session that names none: ``DEFAULT_METHOD``; with ``targets`` the multi-target default;
    a paired session (``compare_to``) draws at random."""
    if paired:
        return "random"
    return DEFAULT_MULTI_TARGET_METHOD if multi_target else DEFAULT_METHOD


def answered_name(method: str) -> str:
    """The ``method`` a session created with ``method`` answers: a public name itself, a former one the public
    name unless it keeps its own (API.md's ``rs_mean`` and ``bayesame_rs``)."""
    former = FORMER_NAMES.get(method)
    return method if former is None or former.keeps_name else former.method


def only_proposed_items(method: str, params: Any = None) -> bool:
    """Whether a single-target session of ``method`` with ``method_params`` refuses an item it did not propose
    (issue 32 item 9): ``random``'s exact interval and ``refgp``'s ``design_loo`` hold for their own draws only."""
    try:
        return resolve(method, params)[1].only_proposed_items()
    except ValueError:
        return False


def needs_levels(config: SessionConfig) -> bool:
    """Whether the estimator reads the prior's level histogram (``BucketPrior.level_hist``): BayesAME's."""
    return resolve(config.method, config.method_params)[0] == "bayesame"


def method_table() -> dict[str, Any]:
    """The session methods as JSON (``GET /v1/sessions/methods``, the ``Link`` of a former name's ``Deprecation``
    header): the defaults, one entry per public method (its ``method_params`` keys with their defaults and JSON
    schema) and the former names with what they resolve to."""
    methods = []
    for s in METHOD_SPECS.values():
        defaults = s.params()
        methods.append({"name": s.name, "summary": s.summary, "method_params": list(s.params.model_fields),
                        "method_params_defaults": defaults.full(), "method_params_schema": s.params.model_json_schema(),
                        "multi_target": s.multi_target, "interval_kinds": list(s.interval_kinds),
                        "hyperparameters": defaults.takes_hyperparameters(),
                        "only_proposed_items": defaults.only_proposed_items()})
    return {
        "default": DEFAULT_METHOD, "default_multi_target": DEFAULT_MULTI_TARGET_METHOD,
        "methods": methods,
        "deprecated": [{"name": old, "method": f.method, "method_params": dict(f.params),
                        "answers_as": answered_name(old),
                        "note": f"a former name: give method {f.method!r} with these method_params"}
                       for old, f in FORMER_NAMES.items()],
    }


def make_estimator(prior: BucketPrior, config: SessionConfig, score_range: ScoreRange = None) -> Any:
    """A fresh single-target estimator of ``config.method`` with its ``method_params`` (``score_range``: the
    benchmark's bounds, read by the design-based methods)."""
    config.validate()
    name, params = resolve(config.method, config.method_params)
    return METHOD_SPECS[name].factory(prior, config, params, score_range)


def _by_name(method: str) -> Callable[..., Any]:
    def factory(prior: BucketPrior, config: SessionConfig, score_range: ScoreRange = None) -> Any:
        if config.method != method:
            config = dataclasses.replace(config, method=method)
        return make_estimator(prior, config, score_range)
    return factory


#: every name (public and former) -> its estimator factory ``(prior, config)`` (the backtests' table)
ESTIMATORS: dict[str, Callable[..., Any]] = {name: _by_name(name) for name in METHODS}

__all__ = ["ALIASES", "DEFAULT_METHOD", "DEFAULT_MULTI_TARGET_METHOD", "ESTIMATORS", "METHOD_SPECS",
           "MULTI_TARGET_METHODS", "PUBLIC_METHODS", "MethodSpec", "answered_name", "default_method",
           "hyperparameter_methods", "make_estimator", "method_table", "resolve"]
