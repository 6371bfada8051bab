"""Session configuration for sequential evaluation (papers/004, §3.1, App. C.1): the session's settings
(``SessionConfig``), the names a session's ``method`` takes, and each public method's typed parameters
(``method_params``: one pydantic model per method, extra keys forbidden; the method table is
``methods.METHOD_SPECS``)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .stopping import DEFAULT_LEVEL, StopRule, check_level

#: the method of a session that names none: the one default (``SessionConfig.method``, the API's omitted
#: ``method``; a multi-target session's default is derived from it in ``methods.DEFAULT_MULTI_TARGET_METHOD``)
DEFAULT_METHOD = "active_design"
# the public names, in the method table's order (docs/SEQUENTIAL.md; methods.METHOD_SPECS)
PUBLIC_METHODS = ("active_design", "random", "bayesame", "refgp", "proeval_bq", "fluid_irt")
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


@dataclass(frozen=True)
class FormerName:
    """A former method name, accepted one more release with a ``Deprecation`` header: the public method and
    fixed parameters it stands for. ``keeps_name``: the session answers under the former name (API.md names
    ``rs_mean`` and ``bayesame_rs``; their sessions stay as they were), else under the public name."""

    method: str
    params: dict[str, Any]
    keeps_name: bool = False


#: former names -> what they resolve to (``GET /v1/sessions/methods`` lists them under ``deprecated``)
FORMER_NAMES: dict[str, FormerName] = {
    **{old: FormerName("refgp", dict(p)) for old, p in REFGP_VARIANTS.items()},
    "bayesame_rs": FormerName("bayesame", {"selection": "random"}, keeps_name=True),
    "rs_mean": FormerName("random", {"interval": "paper_normal"}, keeps_name=True),
}
# every name ``method`` takes (the API's enum, the order of its messages: unchanged since the former names came)
METHODS = ("active_design", "random", "refgp", "refgp_v3", "refgp_cal", "refgp_v2", "refgp_ivr", "refgp_dr", "bayesame",
           "bayesame_rs", "rs_mean", "proeval_bq", "fluid_irt")
assert set(METHODS) == set(PUBLIC_METHODS) | set(FORMER_NAMES) and len(METHODS) == len(set(METHODS))
INTERVAL_KINDS = ("sequential", "anytime", "fixed_n")  # active_design.INTERVAL_KINDS; sequential the default
HYPERPARAMETER_KEYS = ("alpha", "beta", "sigma2")
#: ``active_design``'s working models: readable name -> the refgp preset it runs (with variance="model")
#: (``factor``: the logistic factor model, factor_model.py; ``prequential``: before each draw, whichever of
#: reference_gp_evidence_mix and factor predicted the items observed so far better, each before it was observed;
#: both run the reference GP of refgp_v3 alongside, which the design uses without bounds)
WORKING_MODELS: dict[str, str] = {"reference_gp_evidence_mix": "refgp_v3", "reference_gp": "refgp_ivr",
                                  "factor": "refgp_v3", "prequential": "refgp_v3"}
WORKING_MODEL_ALIASES = {"refgp_v3": "reference_gp_evidence_mix", "refgp_ivr": "reference_gp"}  # the former values


# --------------------------------------------------------------------------- typed method_params

Share = Annotated[StrictFloat, Field(gt=0, le=1)]  # a number (an integer is taken as a float), not a bool or string


class MethodParams(BaseModel):
    """Base of the per-method ``method_params`` models: unknown keys are refused (``extra="forbid"``)."""

    model_config = ConfigDict(extra="forbid")
    #: the method's ``interval_kind`` values (empty: the field is refused) and whether it runs with ``targets``
    interval_kinds: ClassVar[tuple[str, ...]] = ()
    multi_target: ClassVar[bool] = False

    def given(self) -> dict[str, Any]:
        """The parameters the caller set (as stored in the session's config and passed to the estimator)."""
        return self.model_dump(exclude_unset=True)

    def full(self) -> dict[str, Any]:
        """Every parameter, defaults filled."""
        return self.model_dump()

    def takes_hyperparameters(self) -> bool:
        """Whether the session's ``hyperparameters`` ({alpha, beta, sigma2} of the bucket prior) apply."""
        return False

    def only_proposed_items(self) -> bool:
        """Whether an item the session did not propose is refused (409; its interval holds for its draws only)."""
        return False


class ActiveDesignParams(MethodParams):
    """``active_design``: the draw's uniform share, the working model and the point estimate."""

    model_config = ConfigDict(extra="forbid", title="ActiveDesignParams")
    interval_kinds: ClassVar[tuple[str, ...]] = INTERVAL_KINDS

    uniform_share: Share = Field(default=0.25, description="gamma: the uniform floor of the draw probabilities, "
                                                           "in (0, 1].")
    extrapolation_share: Share = Field(default=0.6, description="gamma once the terms say the target is outside "
                                                                "the references, in [uniform_share, 1].")
    working_model: Literal["reference_gp_evidence_mix", "reference_gp", "factor", "prequential"] = Field(
        default="reference_gp_evidence_mix",
        description="The model whose predictions the design corrects: reference_gp_evidence_mix (the reference-"
                    "score GP whose prior mean mixes the references' mean and a logit shift by evidence, 64 "
                    "directions), reference_gp (the references' mean, 16 directions), factor (a logistic factor "
                    "model of the references' scores, the target's factor from its observed items, after FAQ) or "
                    "prequential (before each draw, whichever of reference_gp_evidence_mix and factor predicted the "
                    "items observed so far better). Former values refgp_v3 and refgp_ivr are accepted.")
    point: Literal["model", "design", "compromise"] = Field(
        default="model", description="The point estimate: the model's, the design's, or their compromise.")
    adaptive_share: StrictBool = Field(default=True, description="Let the uniform share adapt to the observed "
                                                                "residuals.")

    @field_validator("working_model", mode="before")
    @classmethod
    def _former_working_model(cls, value: Any) -> Any:
        return WORKING_MODEL_ALIASES.get(value, value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _shares_ordered(self) -> ActiveDesignParams:
        if self.uniform_share > self.extrapolation_share:
            raise _located("extrapolation_share", "must be >= uniform_share", self.extrapolation_share)
        return self


class RefGPParams(MethodParams):
    """``refgp``: the reference-score GP's components (the presets: ``REFGP_VARIANTS``; default ``refgp_v3``'s)."""

    model_config = ConfigDict(extra="forbid", title="RefGPParams")

    mean: Literal["reference", "logit_shift", "evidence_mix"] = Field(
        default=REFGP_VARIANTS[REFGP_DEFAULT]["mean"],
        description="The prior mean: the references' mean, a logit shift of it, or both mixed by evidence.")
    variance: Literal["model", "calibrated", "design_loo"] = Field(
        default=REFGP_VARIANTS[REFGP_DEFAULT]["variance"],
        description="The interval's variance: the model's, calibrated on the references, or the difference "
                    "estimator's design-based one (needs selection random).")
    selection: Literal["ivr", "random"] = Field(
        default=REFGP_VARIANTS[REFGP_DEFAULT]["selection"],
        description="Integral variance reduction or uniform random items.")
    directions: Annotated[StrictInt, Field(ge=REFGP_DIRECTIONS[0], le=REFGP_DIRECTIONS[1])] = Field(
        default=REFGP_VARIANTS[REFGP_DEFAULT]["directions"],
        description="Reference directions kept as features, 1-128.")

    def only_proposed_items(self) -> bool:
        return self.variance == "design_loo"

    @model_validator(mode="after")
    def _design_needs_random(self) -> RefGPParams:
        if self.variance == "design_loo" and self.selection != "random":
            raise _located("variance", "design_loo (the difference estimator's design-based variance) needs "
                                       f"selection random, got selection {self.selection!r}", self.variance)
        return self


class RandomParams(MethodParams):
    """``random``: which interval (``paper_normal`` is papers/004's RS-Mean baseline, the former ``rs_mean``)."""

    model_config = ConfigDict(extra="forbid", title="RandomParams")

    interval: Literal["finite_population", "paper_normal"] = Field(
        default="finite_population",
        description="finite_population (the default: uniform items, the sample mean, the exact hypergeometric "
                    "interval for binary scores, the FPC normal interval with a variance floor otherwise) or "
                    "paper_normal (papers/004's RS-Mean: its draws, the sample mean with a pseudo-count floor, the "
                    "normal interval; the former rs_mean; takes hyperparameters for its prior state).")

    def takes_hyperparameters(self) -> bool:
        return self.interval == "paper_normal"

    def only_proposed_items(self) -> bool:
        return self.interval == "finite_population"


class BayesAMEParams(MethodParams):
    """``bayesame``: the item selection (``random`` is the paper's random baseline, the former ``bayesame_rs``)."""

    model_config = ConfigDict(extra="forbid", title="BayesAMEParams")
    multi_target: ClassVar[bool] = True  # the joint model of papers/004 §3.2 is built on its buckets

    selection: Literal["information_gain", "random"] = Field(
        default="information_gain",
        description="information_gain (papers/004: greedy information gain when every item has its own bucket, "
                    "else random) or random (uniform random items; the former bayesame_rs).")

    def takes_hyperparameters(self) -> bool:
        return True


class ProEvalBQParams(MethodParams):
    """``proeval_bq``: no parameters."""

    model_config = ConfigDict(extra="forbid", title="ProEvalBQParams")


class FluidIRTParams(MethodParams):
    """``fluid_irt``: no parameters."""

    model_config = ConfigDict(extra="forbid", title="FluidIRTParams")


#: public method -> its ``method_params`` model (``methods.METHOD_SPECS`` adds the factories, in this order)
PARAMS: dict[str, type[MethodParams]] = {
    "active_design": ActiveDesignParams, "random": RandomParams, "bayesame": BayesAMEParams, "refgp": RefGPParams,
    "proeval_bq": ProEvalBQParams, "fluid_irt": FluidIRTParams}
assert tuple(PARAMS) == PUBLIC_METHODS and all(f.method in PARAMS for f in FORMER_NAMES.values())


def resolve(method: str, params: Any = None) -> tuple[str, MethodParams]:
    """``(public name, typed parameters)`` of ``method`` (a public or former name) with ``method_params``;
    ValueError naming ``method`` or ``method_params.<key>`` otherwise. A former name takes no ``method_params``
    (its parameters are fixed)."""
    former = FORMER_NAMES.get(method)
    if former is not None:
        if params is not None:
            raise ValueError(f"method_params: not allowed with method {method!r}, a former name of {former.method} "
                             f"with fixed parameters; give method {former.method!r} with method_params instead")
        name, params = former.method, former.params
    elif method in PARAMS:
        name = method
    else:
        raise ValueError(f"method: must be one of {METHODS}, got {method!r}")
    model = PARAMS[name]
    if params is not None and not isinstance(params, dict):
        raise ValueError("method_params: must be an object")
    try:
        return name, model.model_validate(params or {})
    except ValidationError as exc:
        raise params_error(exc, model, name) from None


def hyperparameter_methods() -> list[str]:
    """The names (public and former) whose parameters take ``hyperparameters``."""
    return [n for n in METHODS if resolve(n)[1].takes_hyperparameters()]


def _located(key: str, message: str, value: Any) -> ValidationError:
    """A validation error of ``method_params.<key>`` (a model validator's check that concerns one key)."""
    return ValidationError.from_exception_data("method_params", [
        {"type": PydanticCustomError("params_check", message), "loc": (key,), "input": value}])


def params_messages(exc: ValidationError, model: type[MethodParams],
                    method: str) -> list[tuple[tuple[str | int, ...], str, str]]:
    """``(loc, type, message)`` per error of ``method_params`` validated by ``model`` for ``method``: the
    message in the API's words (``must be ...``, the value given; an unknown key names the allowed ones)."""
    out = []
    for e in exc.errors(include_url=False):
        msg = str(e["msg"]).replace("Input should be ", "must be ")
        value = e.get("input")
        if e["type"] == "extra_forbidden":
            keys = ", ".join(model.model_fields)
            msg = f"unknown key for {method} " + (f"(allowed: {keys})" if keys else "(it takes no parameters)")
        elif e["type"] == "model_type" and not e["loc"]:
            msg = "must be an object"
        elif e["type"] not in ("missing", "params_check") and not isinstance(value, (dict, list)):
            msg += f", got {value!r}"
        out.append((tuple(e["loc"]), str(e["type"]), msg))
    return out


def params_error(exc: ValidationError, model: type[MethodParams], method: str) -> ValueError:
    """The first error of ``method_params`` as the core's ValueError ``method_params.<key>: <message>``."""
    loc, _, msg = params_messages(exc, model, method)[0]
    return ValueError(f"{'.'.join(['method_params', *map(str, loc)])}: {msg}")


def refgp_params(params: dict[str, Any] | None) -> dict[str, Any]:
    """The full, checked parameter set ``{mean, variance, selection, directions}`` of a refgp session:
    ``params`` over the default's (``REFGP_DEFAULT``); ValueError naming ``method_params.<key>`` otherwise."""
    try:
        return RefGPParams.model_validate(dict(params or {})).full()
    except ValidationError as exc:
        raise params_error(exc, RefGPParams, "refgp") from None


def refgp_variant(params: dict[str, Any] | None) -> str | None:
    """The preset (former method name) whose parameters are ``params`` (missing keys: the default's), or None
    for another combination; ValueError naming ``method_params`` for an invalid set (:func:`refgp_params`)."""
    full = refgp_params(params)
    for name, variant in REFGP_VARIANTS.items():
        if variant == full:
            return name
    return None


def _is_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _is_real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


@dataclass(frozen=True)
class SessionConfig:
    """A session's settings. The paper's rule's defaults (App. C.1): eps1=0.005, eps2=0.02, W=30, F=50, N0=10."""

    method: str = DEFAULT_METHOD  # one of METHODS: a public name or a former one (FORMER_NAMES)
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
    # a paired session (core.sequential.paired.PairedSession): {to, kind, model, delta}
    compare: dict[str, Any] | None = None

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
        name, params = resolve(self.method, self.method_params)
        if self.compare is not None and self.method != "random":
            raise ValueError(f"method: a paired session (compare_to) draws its items at random; give method "
                             f"random or none, not {self.method!r}")
        if self.interval_kind is not None:
            kinds = type(params).interval_kinds
            if not kinds:
                design = [n for n, model in PARAMS.items() if model.interval_kinds]
                raise ValueError(f"interval_kind: applies to {', '.join(design)} only")
            if self.interval_kind not in kinds:
                raise ValueError(f"interval_kind: must be one of {kinds}, got {self.interval_kind!r}")
            rule = None if self.stop is None else StopRule.from_dict(self.stop)
            if self.interval_kind == "fixed_n" and rule is not None and rule.half_width > 0:
                raise ValueError("interval_kind: fixed_n is valid at a fixed budget only, not at a precision stop "
                                 "(stop.half_width > 0); use anytime")
        if self.stop is not None:
            rule = StopRule.from_dict(self.stop)
            if "level" in self.stop and rule.level != float(self.level):
                raise ValueError(f"stop.level: {rule.level!r} differs from level {self.level!r}")
        hp = self.hyperparameters
        if hp is not None and not params.takes_hyperparameters():
            raise ValueError(f"hyperparameters: apply to {', '.join(hyperparameter_methods())} only; "
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
