"""Request/response models of the Sequential sessions section of API.md (``/v1/sessions``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from evalplan.core.sequential import METHODS
from evalplan.core.sequential.config import (
    FORMER_NAMES,
    ActiveDesignParams,
    BayesAMEParams,
    FluidIRTParams,
    MethodParams,
    ProEvalBQParams,
    RandomParams,
    RefGPParams,
)
from evalplan.core.sequential.methods import METHOD_SPECS, default_method
from evalplan.kit.schemas import MAX_COUNT, NameText, RequestModel, Seed, UtcDatetime, Visibility

UNCHECKED = "unchecked"  # method_params left to the service: the method is unknown, or a former name


def _params_tag(value: Any) -> str:
    """The branch of ``method_params``: the method whose model validated it (``SessionCreate._typed_params``)."""
    if isinstance(value, MethodParams):
        return next(s.name for s in METHOD_SPECS.values() if type(value) is s.params)
    return UNCHECKED


#: ``method_params``: one typed model per public method, chosen by the session's resolved ``method`` (a field
#: beside it, so the union's discriminator is that method, applied by ``SessionCreate._typed_params``); OpenAPI
#: shows ``oneOf`` the models
MethodParamsField = Annotated[
    Annotated[ActiveDesignParams, Tag("active_design")] | Annotated[RandomParams, Tag("random")]
    | Annotated[BayesAMEParams, Tag("bayesame")] | Annotated[RefGPParams, Tag("refgp")]
    | Annotated[ProEvalBQParams, Tag("proeval_bq")] | Annotated[FluidIRTParams, Tag("fluid_irt")]
    | Annotated[dict[str, Any], Tag(UNCHECKED), SkipJsonSchema()],
    Discriminator(_params_tag)]
assert {s.name: s.params for s in METHOD_SPECS.values()} == {
    "active_design": ActiveDesignParams, "random": RandomParams, "bayesame": BayesAMEParams, "refgp": RefGPParams,
    "proeval_bq": ProEvalBQParams, "fluid_irt": FluidIRTParams}  # the union above is the method table's


class StopIn(RequestModel):
    """Precision stopping (API.md "Sessions: precision stopping")."""

    half_width: StrictFloat | StrictInt = Field(description="Stop once the level interval's half-width is at most "
                                                            "this, in score units; 0 never stops on precision.")
    level: StrictFloat | None = Field(None, description="Level of the interval (default 0.95).")
    min_items: StrictInt | None = Field(None, description="Never stop on precision before this many items "
                                                          "(default 10).")
    anytime_valid: StrictBool | None = Field(None, description="Use a betting confidence sequence, valid however "
                                                               "often the caller looks; items are then drawn "
                                                               "uniformly at random (default false).")


class MaxItemsFraction(RequestModel):
    fraction: StrictFloat | StrictInt = Field(description="Fraction of the benchmark's items, 0 < f <= 1.")


class SessionCreate(RequestModel):

    benchmark: str = Field(description="Benchmark id or name.")
    target: NameText | None = Field(None, description="The evaluated model's name (it need not exist yet). "
                                                 "Exactly one of target and targets.")
    targets: list[NameText] | None = Field(None, description="Multi-target session (extension): two or more distinct "
                                                       "model names, evaluated jointly; instead of target.")
    n_latent: StrictInt | None = Field(None, le=MAX_COUNT,
                                       description="Multi-target only: number of latent GPs (default 2).")
    reference_models: list[str] | Literal["all"] | None = Field(
        None, description='Reference models (names or ids) for the bucket prior; default "all" models with '
                          "scores on the benchmark except the target. At least 2.")
    method: str | None = Field(
        None, description="active_design (the default: items drawn at random with recorded probabilities, the "
                          "reference model's prediction plus inverse-probability-weighted residuals, a sequential "
                          "interval valid at the stop; docs/SEQUENTIAL.md), random (uniform, sample mean, exact "
                          "finite-population interval), bayesame (papers/004), refgp (the reference-score GP family, "
                          "variant in method_params), proeval_bq (ProEval's BQ), fluid_irt (Fluid Benchmarking). "
                          "Former names, accepted with a Deprecation header (GET /v1/sessions/methods): rs_mean "
                          "(random with method_params {interval: paper_normal}) and bayesame_rs (bayesame with "
                          "{selection: random}), answered under their own names; refgp_ivr, refgp_v2, refgp_v3, "
                          "refgp_cal and refgp_dr (refgp presets), answered as refgp. Omitted: active_design "
                          "(bayesame for multi-target sessions, random with compare_to). The response carries the "
                          "resolved name.",
        json_schema_extra={"enum": list(METHODS)})
    epsilon1: float | None = Field(None, description="Stopping tolerance on the estimate's change (default 0.005).")
    epsilon2: float | None = Field(None, description="Stopping tolerance on the interval (default 0.02).")
    window: int | None = Field(None, le=MAX_COUNT, description="Stopping-rule window (default 30).")
    refit_every: int | None = Field(None, le=MAX_COUNT,
                                    description="Refit hyperparameters every n observations; 0 = never (default 50).")
    max_items: Annotated[StrictInt, Field(le=MAX_COUNT)] | MaxItemsFraction | None = Field(
        None, description='Stop after this many observations: an integer or {"fraction": f} of the items.')
    stop: StopIn | None = Field(None, description="Precision stopping {half_width, level?, min_items?, "
                                                  "anytime_valid?}; replaces the paper's (epsilon1, epsilon2, window) "
                                                  "rule.")
    level: StrictFloat | None = Field(None, description="Level of the session's ci (default 0.95, or stop.level).")
    previous: list[str] | None = Field(None, description="Earlier checkpoints of the same training run (model names "
                                                         "or ids, oldest first): their scores, complete or partial "
                                                         "(earlier sessions' observations count), weigh strongly "
                                                         "in the prior.")
    compare_to: str | None = Field(None, description="A paired comparison session: a model (id or name) or an earlier "
                                                     "session (id) whose scores on the benchmark are known; the "
                                                     "session estimates target - compare_to on the same items, drawn "
                                                     "at random, and stops on a decision (better, worse, within "
                                                     "+-delta).")
    delta: StrictFloat | StrictInt | None = Field(None, description="With compare_to: the equivalence margin in score "
                                                                    "units (> 0, at most the score range's width); "
                                                                    "the session may stop on within +-delta.")
    batch_size: int | None = Field(None, le=MAX_COUNT, description="Items proposed per step (default 1).")
    method_params: MethodParamsField | None = Field(
        None, description="The method's typed parameters, one object per method (chosen by method, or its default): "
                          "active_design {uniform_share, extrapolation_share, working_model, point, adaptive_share}, "
                          "random {interval}, bayesame {selection}, refgp {mean, variance, selection, directions} "
                          "(its variants: docs/SEQUENTIAL.md); proeval_bq and fluid_irt take none. Unknown keys are "
                          "refused. A former method name takes none (its parameters are fixed).",
        json_schema_extra={"x-discriminator": "method"})
    interval_kind: Literal["sequential", "anytime", "fixed_n"] | None = Field(
        None, description="active_design only: sequential (default; Chow-Robbins fixed-width interval with a "
                          "variance floor and a confidence-sequence guard, valid at the precision stop), anytime "
                          "(a confidence sequence, valid however often you look) or fixed_n (narrower, valid at a "
                          "fixed budget only; not with stop.half_width > 0).")
    hyperparameters: dict[str, float] | None = Field(None, description="{alpha, beta, sigma2}; fixes them.")
    seed: Seed | None = Field(None, description="Random seed (default 0).")
    visibility: Visibility = Field("private", description="private (the owning team only) or public (readable "
                                                          "by every team); PATCH changes it.")

    @model_validator(mode="before")
    @classmethod
    def _typed_params(cls, data: Any) -> Any:
        """``method_params`` validated by the model of the session's method (given, or the default for the
        request's kind): the union's branch. Left as given when the method is unknown or a former name, or the
        parameters are invalid: the service answers that (``validation.config_of`` -> ``SessionConfig.validate``,
        the same words for every caller), a 422 located at ``method_params.<key>``, nothing stored."""
        if not isinstance(data, dict) or data.get("method_params") is None:
            return data
        params = data["method_params"]
        if not isinstance(params, dict):
            raise ValidationError.from_exception_data(cls.__name__, [
                {"type": "dict_type", "loc": ("method_params",), "input": params}])
        method = data.get("method")
        if method is None:
            method = default_method(multi_target=data.get("targets") is not None,
                                    paired=data.get("compare_to") is not None)
        if not isinstance(method, str) or method in FORMER_NAMES or method not in METHOD_SPECS:
            return data
        try:
            typed = METHOD_SPECS[method].params.model_validate(params)
        except ValidationError:
            return data  # the service names the key (config_of: a located 422, as every session-config problem)
        return {**data, "method_params": typed}


class ObservationBody(RequestModel):

    item: str | StrictInt
    score: StrictFloat | StrictInt
    target: str | None = None  # multi-target sessions only (required there)


class ObservationsPost(RequestModel):
    """Either one ``{item, score}`` or ``{observations: [{item, score}, ...]}``; a multi-target session
    needs ``target`` with each (``{target, item, score}``)."""


    item: str | StrictInt | None = None
    score: StrictFloat | StrictInt | None = None
    target: str | None = None
    observations: list[ObservationBody] | None = None

    @model_validator(mode="after")
    def _one_form(self) -> ObservationsPost:
        single = self.item is not None or self.score is not None or self.target is not None
        if single and self.observations is not None:
            raise ValueError("give either {item, score} or {observations: [...]}, not both")
        if self.observations is None and (self.item is None or self.score is None):
            raise ValueError("give {item, score} or {observations: [{item, score}, ...]}")
        return self

    def triples(self) -> list[tuple[str, float, str | None]]:
        """(item, score, target) in request order; target None where not given."""
        if self.observations is not None:
            return [(str(o.item), float(o.score), o.target) for o in self.observations]
        return [(str(self.item), float(self.score), self.target)]  # type: ignore[arg-type]


class TargetState(BaseModel):
    """One target of a multi-target session."""

    status: str
    stop_reason: str | None
    n_observed: int
    estimate: float | None
    variance: float | None
    ci: list[float | None]


class Proposal(BaseModel):
    target: str
    item: str


class SessionOut(BaseModel):
    """The API.md session; multi-target sessions add ``targets``, ``n_latent``, ``next``, ``per_target``
    (absent from single-target ones)."""

    id: str
    benchmark: str
    target: str | None
    status: str
    stop_reason: str | None
    next_items: list[str]
    n_observed: int
    estimate: float | None
    variance: float | None
    ci: list[float | None] | None
    level: float | None = None
    previous: list[str] | None = None
    method: str
    config: dict[str, Any]
    hyperparameters: dict[str, Any] | None
    reference_models: list[str]
    created_at: UtcDatetime | None
    updated_at: UtcDatetime | None
    team: str | None = None
    visibility: str | None = None
    targets: list[str] | None = None
    n_latent: int | None = None
    next: list[Proposal] | None = None
    per_target: dict[str, TargetState] | None = None
    interval_kind: str | None = None
    design: dict[str, Any] | None = None
    compare: dict[str, Any] | None = None  # a paired session: {to, kind, model, delta, decision, difference, ...}


class SessionList(BaseModel):
    items: list[SessionOut]
    next_cursor: str | None


class TrajectoryPoint(BaseModel):
    """The estimate after the ``n``-th observation (of ``target``, in a multi-target session)."""

    target: str | None = None
    n: int
    estimate: float | None
    variance: float | None
    ci: list[float | None]
    probability: float | None = None
    difference: float | None = None  # a paired session: target - compare_to after this pair
    difference_ci: list[float | None] | None = None
    decision: str | None = None  # the decision the interval supported then (better, worse, within or null)


class ObservationOut(BaseModel):
    """One posted score; ``n`` is its 1-based arrival order in the session (over all targets)."""

    n: int
    item: str
    score: float
    target: str | None
    created_at: UtcDatetime | None
    probability: float | None = None  # active_design: the recorded inclusion probability of the draw
    off_design: bool | None = None  # active_design: an item it did not propose (known exactly, no design term)


class ObservationList(BaseModel):
    items: list[ObservationOut]
    next_cursor: str | None
