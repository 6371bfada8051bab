"""Request checks of sessions: the configuration, targets and reference models of a new session,
and the observations posted to one (all located 4xx problems, nothing stored on failure)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from evalplan.benchmarks import repository as benchmark_repository
from evalplan.benchmarks.service import scale_of, score_range
from evalplan.core.sequential import METHODS, SessionConfig
from evalplan.core.sequential.active_design import FACTOR, PREQUENTIAL
from evalplan.core.sequential.config import MethodParams, resolve
from evalplan.core.sequential.factor_model import MAX_FIT_CELLS
from evalplan.core.sequential.methods import (
    ALIASES,
    MULTI_TARGET_METHODS,
    answered_name,
    default_method,
    only_proposed_items,
)
from evalplan.core.sequential.stopping import StopRule, resolve_max_items
from evalplan.db.models import Benchmark, EvalSession
from evalplan.kit.errors import Conflict, InvalidInput, NotFound
from evalplan.models import repository as model_repository
from evalplan.models.service import check_reference_form
from evalplan.sessions import repository as session_repository
from evalplan.sessions.priors import PriorEntry
from evalplan.sessions.schemas import SessionCreate

MULTI_METHODS = MULTI_TARGET_METHODS
CONFIG_FIELDS = ("epsilon1", "epsilon2", "window", "refit_every", "max_items", "batch_size",
                 "hyperparameters", "seed", "stop", "level", "interval_kind", "method_params")
PAPER_RULE_FIELDS = ("epsilon1", "epsilon2", "window")
MAX_OBSERVATIONS_PER_REQUEST = 10_000
MAX_TARGETS = 32  # the joint posterior costs O(T B n) per observation
MAX_LATENT = 16
MAX_PREVIOUS = 16


def resolved_method(request: SessionCreate) -> str:
    """The method a session runs: the given one, else ``methods.default_method``: ``DEFAULT_METHOD``, with
    ``targets`` the multi-target default (the table's), with ``compare_to`` random."""
    if request.method is not None:
        return request.method
    return default_method(multi_target=request.targets is not None, paired=request.compare_to is not None)


def _field_of(message: str) -> str:
    """The request field a core ValueError names (``field: ...``), e.g. ``stop.half_width``."""
    head = message.split(":", 1)[0].strip()
    root = head.split(".", 1)[0]
    if root in CONFIG_FIELDS + ("method", "n0"):
        return head
    return next((f for f in sorted(CONFIG_FIELDS, key=len, reverse=True) if f in message), "config")


def config_of(request: SessionCreate, n_items: int) -> Any:
    """The checked core ``SessionConfig`` of the request body: ``max_items`` resolved against the
    benchmark's ``n_items``, ``stop`` normalized (its defaults filled), ``level`` = ``stop.level`` when a
    rule is given, a former method name replaced by its public name and parameters."""
    method = resolved_method(request)
    body = request.model_dump(include=set(CONFIG_FIELDS), exclude_unset=True)  # method_params: the keys given
    given = {name: body[name] for name in CONFIG_FIELDS if body.get(name) is not None}
    if method in ALIASES and answered_name(method) != method:  # a former name answered with the public name
        name, params = ALIASES[method]
        if "method_params" in given:
            raise InvalidInput(f"method {method!r} is a former name of {name} with fixed parameters; give "
                               f"method {name!r} with method_params instead",
                               [{"field": "method_params", "detail": f"not allowed with method {method!r}"}])
        method, given["method_params"] = name, dict(params)
    if method not in METHODS:
        raise InvalidInput(f"unknown method {method!r}; valid methods: {', '.join(METHODS)}",
                           [{"field": "method", "detail": f"must be one of {', '.join(METHODS)}"}])
    try:
        if "stop" in given:
            clash = [f for f in PAPER_RULE_FIELDS if f in given]
            if clash:
                raise ValueError(f"{clash[0]}: belongs to the paper's rule; it cannot be combined with stop")
            stop = {k: v for k, v in dict(given["stop"]).items() if v is not None}
            rule = StopRule.from_dict(stop)
            if "level" in given and "level" in stop and float(given["level"]) != rule.level:
                raise ValueError(f"level: {given['level']!r} differs from stop.level {rule.level!r}")
            if "level" in given and "level" not in stop:
                rule = StopRule.from_dict({**stop, "level": given["level"]})
            given["stop"], given["level"] = rule.as_dict(), rule.level
        if "max_items" in given:
            requested = given["max_items"]
            given["max_items"] = resolve_max_items(requested, n_items)
            if isinstance(requested, dict):
                given["max_items_fraction"] = float(requested["fraction"])
        config = SessionConfig(method=method, **given)
        config.validate()
    except (ValueError, TypeError) as exc:
        message = str(exc)
        raise InvalidInput(f"invalid session configuration: {message}",
                           [{"field": _field_of(message), "detail": message}]) from None
    return config


def check_stop_fits(config: Any, benchmark: Benchmark, multi_target: bool) -> None:
    """``stop.anytime_valid`` needs a bounded score range and a single target (422 otherwise)."""
    rule = config.stop_rule
    if rule is None or not rule.anytime_valid:
        return
    if multi_target:
        raise InvalidInput("stop.anytime_valid is for single-target sessions",
                           [{"field": "stop.anytime_valid", "detail": "not supported with targets"}])
    lo, hi = score_range(benchmark, infinite=True)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InvalidInput(f"stop.anytime_valid needs a bounded score range; benchmark {benchmark.name!r} "
                           f"has [{lo}, {hi}]",
                           [{"field": "stop.anytime_valid", "detail": "the benchmark's scores are unbounded"}])


def check_sizes(config: Any, n_items: int) -> None:
    """422 when a size parameter exceeds the benchmark: ``batch_size`` proposes that many items per
    step (and the estimator allocates per proposed item), so it is capped at the number of items."""
    if config.batch_size > n_items:
        raise InvalidInput(f"batch_size {config.batch_size} is larger than the benchmark's {n_items} items",
                           [{"field": "batch_size", "detail": f"at most {n_items}"}])


FACTOR_WORKING_MODELS = (FACTOR, PREQUENTIAL)


def check_working_model_cost(config: Any, n_references: int, n_items: int) -> None:
    """422 when ``method_params.working_model`` needs the factor model's fit (``factor``, ``prequential``) on more
    than ``factor_model.MAX_FIT_CELLS`` reference scores: that fit runs inside this request."""
    _, params = resolve(config.method, config.method_params)
    working_model = getattr(params, "working_model", None)
    if working_model not in FACTOR_WORKING_MODELS:
        return
    cells = n_references * n_items
    if cells > MAX_FIT_CELLS:
        raise InvalidInput(
            f"working_model {working_model!r} fits a factor model on the references' scores when the session "
            f"is created: {n_references} references x {n_items} items = {cells:,} scores, more than the "
            f"{MAX_FIT_CELLS:,} this request may fit; use the default working model, or fewer reference_models",
            [{"field": "method_params.working_model", "detail": f"at most {MAX_FIT_CELLS:,} reference scores"}])


def config_dict(config: Any) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(config)))


def resolve_target(session: Session, target: str, field: str = "target") -> str:
    target = target.strip() if isinstance(target, str) else target
    if not isinstance(target, str) or not target or len(target) > 300:
        raise InvalidInput(f"{field} must be a model name of 1 to 300 characters",
                           [{"field": field, "detail": f"got {target!r}"}])
    known = model_repository.name_of_id(session, target)
    return known or target  # an id of a known model stands for its name; any other string is a new model


def resolve_targets(session: Session, request: SessionCreate) -> tuple[str | None, list[str] | None]:
    """(target, None) for a single-target request, (None, [names]) for a multi-target one."""
    if request.targets is None:
        if request.target is None:
            raise InvalidInput("give target (one model) or targets (two or more models)",
                               [{"field": "target", "detail": "missing"}])
        if request.n_latent is not None:
            raise InvalidInput("n_latent applies to multi-target sessions (targets) only",
                               [{"field": "n_latent", "detail": "not allowed with target"}])
        return resolve_target(session, request.target), None
    if request.target is not None:
        raise InvalidInput("give either target or targets, not both",
                           [{"field": "targets", "detail": "not allowed with target"}])
    if not isinstance(request.targets, list) or not 2 <= len(request.targets) <= MAX_TARGETS:
        raise InvalidInput(f"targets must list 2 to {MAX_TARGETS} model names",
                           [{"field": "targets", "detail": f"got {request.targets!r}"}])
    names: list[str] = []
    for k, given in enumerate(request.targets):
        name = resolve_target(session, given, f"targets.{k}")
        if name in names:
            raise InvalidInput(f"targets must be distinct; {name!r} is given twice",
                               [{"field": f"targets.{k}", "detail": f"duplicate of targets.{names.index(name)}"}])
        names.append(name)
    return None, names


def resolve_previous(session: Session, given: list[str] | None, targets: list[str]) -> list[str]:
    """The ``previous`` checkpoints' model names (distinct, not a target), oldest first; that each has
    scores or session observations on the benchmark is checked by :func:`previous_scores`."""
    if given is None:
        return []
    if not isinstance(given, list) or not 1 <= len(given) <= MAX_PREVIOUS:
        raise InvalidInput(f"previous must list 1 to {MAX_PREVIOUS} model names (earlier checkpoints, oldest first)",
                           [{"field": "previous", "detail": f"got {given!r}"}])
    names: list[str] = []
    errors = []
    for k, ref in enumerate(given):
        if not isinstance(ref, str) or not ref.strip() or len(ref) > 300:
            errors.append({"field": f"previous.{k}", "detail": f"a model name of 1 to 300 characters, got {ref!r}"})
            continue
        # a model id stands for its name; any other string is a model name or an earlier session's target
        name = model_repository.name_of_id(session, ref.strip()) or ref.strip()
        if name in targets:
            errors.append({"field": f"previous.{k}", "detail": f"{name!r} is the target, not an earlier checkpoint"})
        elif name in names:
            errors.append({"field": f"previous.{k}", "detail": f"{name!r} is given twice"})
        else:
            names.append(name)
    if errors:
        raise InvalidInput(f"invalid previous: {errors[0]['detail']}", errors)
    return names


def previous_scores(session: Session, benchmark: Benchmark, names: list[str], model_names: list[str],
                    values: Any, item_pks: list[int]) -> list[Any]:
    """Each checkpoint's scores over the benchmark's items (NaN where unknown): its stored scores, and
    where it has none, the observations of its earlier sessions on this benchmark (either kind)."""
    import numpy as np

    col = {pk: j for j, pk in enumerate(item_pks)}
    rows = []
    errors = []
    for k, name in enumerate(names):
        row = np.full(len(item_pks), np.nan)
        if name in model_names:
            row = np.array(values[model_names.index(name)], dtype=np.float64, copy=True)
        for target, targets, t_index, item_pk, score in session_repository.observations_on(session, benchmark.id):
            owner = target if not targets else targets[int(t_index)]
            j = col.get(int(item_pk))
            if owner == name and j is not None and np.isnan(row[j]):
                row[j] = float(score)
        if np.isnan(row).all():
            errors.append({"field": f"previous.{k}",
                           "detail": f"{name!r} has no scores and no session observations on {benchmark.name!r}"})
        rows.append(row)
    if errors:
        raise InvalidInput(f"invalid previous: {errors[0]['detail']}", errors)
    return rows


def resolve_compare(session: Session, request: SessionCreate, benchmark: Benchmark, target: str | None,
                    model_names: list[str], values: Any, item_pks: list[int]) -> tuple[dict[str, Any], Any] | None:
    """A paired session's comparator (``compare_to``: a model id or name, or a session id, readable by the caller)
    as ``({to, kind, model, delta}, scores over the benchmark's items with NaN where unknown)``; None without
    ``compare_to``. Located 422s (nothing stored): unknown (another team's private model or session is unknown),
    without scores on the benchmark, the target itself, a multi-target request, ``previous`` with it, ``delta``
    without it, ``delta`` <= 0 or wider than the score range."""
    import numpy as np

    given, delta = request.compare_to, request.delta
    if given is None:
        if delta is not None:
            raise InvalidInput("delta applies to a paired session only (compare_to)",
                               [{"field": "delta", "detail": "give compare_to with it"}])
        return None
    def bad(field: str, detail: str) -> InvalidInput:
        return InvalidInput(f"invalid {field}: {detail}", [{"field": field, "detail": detail}])
    ref = given.strip() if isinstance(given, str) else ""
    if not ref or len(ref) > 300:
        raise bad("compare_to", f"a model name or id, or a session id, of 1 to 300 characters; got {given!r}")
    if request.targets is not None:
        raise bad("compare_to", "a paired session has one target (give target, not targets)")
    if request.method not in (None, "random"):
        raise bad("method", f"a paired session (compare_to) draws its items at random; give method random or "
                            f"none, not {request.method!r}")
    if request.previous is not None:
        raise bad("previous", "a paired session (compare_to) draws its items at random and does not use previous")
    params = request.method_params
    if params is not None and (params.model_dump(exclude_unset=True) if isinstance(params, MethodParams) else params):
        raise bad("method_params", "a paired session (compare_to) takes no method_params: its items are drawn "
                                   "uniformly and its interval is the paired betting confidence sequence")
    lo, hi = score_range(benchmark, infinite=True)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise bad("compare_to", f"a paired session needs a bounded score range; benchmark {benchmark.name!r} "
                                f"has [{lo}, {hi}]")
    if delta is not None and (isinstance(delta, bool) or not math.isfinite(float(delta)) or not
                              0.0 < float(delta) <= hi - lo):
        raise bad("delta", f"must be > 0 and at most the score range's width {hi - lo:g}; got {delta!r}")
    compared = session_repository.session_by_id(session, ref)
    scores = np.full(len(item_pks), np.nan)
    if compared is not None:
        if compared.benchmark_id != benchmark.id:
            raise bad("compare_to", f"session {ref!r} is on another benchmark")
        if compared.targets or not compared.target:
            raise bad("compare_to", f"session {ref!r} is a multi-target session; name one of its models instead")
        kind, name = "session", str(compared.target)
        col = {pk: j for j, pk in enumerate(item_pks)}
        if name in model_names:
            scores = np.array(values[model_names.index(name)], dtype=np.float64, copy=True)
        for item_pk, score in session_repository.item_scores(session, compared.id):
            j = col.get(int(item_pk))
            if j is not None:
                scores[j] = float(score)
    else:
        found = model_repository.name_of_ref(session, ref)
        if found is None:
            raise bad("compare_to", f"no model or session with id or name {ref!r}")
        name = str(found)
        kind = "model"
        if name in model_names:
            scores = np.array(values[model_names.index(name)], dtype=np.float64, copy=True)
    if name == target:
        raise bad("compare_to", f"{name!r} is the target; compare it to another model or an earlier session")
    if np.isnan(scores).all():
        raise bad("compare_to", f"{name!r} has no scores on benchmark {benchmark.name!r}")
    return {"to": ref, "kind": kind, "model": name, "delta": None if delta is None else float(delta),
            "n_scores": int(np.sum(~np.isnan(scores)))}, scores


def resolve_references(session: Session, refs: list[str] | str | None, targets: list[str],
                        model_ids: list[str], model_names: list[str], previous: list[str] | None = None) -> list[int]:
    """Row indices (into the benchmark's score matrix) of the reference models (never a target)."""
    refs = check_reference_form(refs)
    previous = previous or []
    if refs is None or refs == "all":
        rows = [i for i, name in enumerate(model_names) if name not in targets and name not in previous]
    else:
        row_of_id = {m: i for i, m in enumerate(model_ids)}
        row_of_name = {n: i for i, n in enumerate(model_names)}
        rows, errors = [], []
        for k, ref in enumerate(refs):
            row = row_of_name.get(ref, row_of_id.get(ref))
            if row is None:
                exists = model_repository.id_of_ref(session, ref)
                errors.append({"field": f"reference_models.{k}",
                               "detail": f"model {ref!r} has no scores on this benchmark" if exists
                               else f"no model with id or name {ref!r}"})
            elif model_names[row] in targets:
                errors.append({"field": f"reference_models.{k}",
                               "detail": f"the target {model_names[row]!r} cannot be its own reference"})
            elif model_names[row] in previous:
                errors.append({"field": f"reference_models.{k}",
                               "detail": f"{model_names[row]!r} is in previous; a checkpoint is not also a reference"})
            elif row not in rows:
                rows.append(row)
        if errors:
            raise InvalidInput(f"invalid reference_models: {errors[0]['detail']}", errors)
    rows.sort()  # canonical (upload) order: the prior is keyed by the set, not the order given
    if len(rows) < 2:
        raise InvalidInput(f"a session needs at least 2 reference models with scores on the benchmark; "
                           f"found {len(rows)}",
                           [{"field": "reference_models", "detail": f"{len(rows)} usable reference model(s)"}])
    return rows


def n_latent_of(request: SessionCreate, config: Any) -> int:
    if config.method not in MULTI_METHODS:
        raise InvalidInput(f"multi-target sessions support the methods {', '.join(MULTI_METHODS)}; "
                           f"got {config.method!r}",
                           [{"field": "method", "detail": f"must be one of {', '.join(MULTI_METHODS)} with targets"}])
    n_latent = 2 if request.n_latent is None else request.n_latent
    if isinstance(n_latent, bool) or not isinstance(n_latent, int) or not 1 <= n_latent <= MAX_LATENT:
        raise InvalidInput(f"n_latent must be an integer from 1 to {MAX_LATENT}",
                           [{"field": "n_latent", "detail": f"got {n_latent!r}"}])
    return n_latent


# --------------------------------------------------------------------------- observations


@dataclass
class ObservationIn:
    item: str
    score: float
    target: str | None = None  # required for (and only for) a multi-target session


def target_indices(row: EvalSession, observations: list[ObservationIn]) -> list[int]:
    """Each observation's target index (0 for a single-target session); 422 on a missing, unknown or
    misplaced target, 409 on a stopped one."""
    if not row.targets:
        misplaced = [{"field": f"observations.{k}.target", "item": o.item,
                      "detail": "target is for multi-target sessions only"}
                     for k, o in enumerate(observations) if o.target is not None]
        if misplaced:
            raise InvalidInput(f"session {row.id} has a single target; observations take no target", misplaced)
        return [0] * len(observations)
    index_of = {name: t for t, name in enumerate(row.targets)}
    invalid = [{"field": f"observations.{k}.target", "item": o.item,
                "detail": "missing: give one of the session's targets" if o.target is None
                else f"{o.target!r} is not a target of this session ({', '.join(row.targets)})"}
               for k, o in enumerate(observations) if o.target not in index_of]
    if invalid:
        raise InvalidInput(f"invalid observation target: {invalid[0]['detail']}", invalid)
    per_target = (row.target_state or {}).get("per_target", {})
    stopped = [{"field": f"observations.{k}.target", "item": o.item, "target": o.target,
                "detail": f"target {o.target!r} has stopped ({per_target[o.target]['stop_reason']})"}
               for k, o in enumerate(observations) if per_target.get(o.target, {}).get("status") == "stopped"]
    if stopped:
        raise Conflict(f"{stopped[0]['detail']}; it takes no more observations", stopped)
    return [index_of[o.target] for o in observations]  # type: ignore[index]


def validate_observations(session: Session, row: EvalSession, benchmark: Benchmark, entry: PriorEntry,
                          observations: list[ObservationIn]) -> tuple[list[tuple[int, int, str, float]], int]:
    """The new (target_index, item_pk, item_id, score) to record, in request order, and the number of
    observations stored so far (the log's length); raises on any problem.

    Item ids resolve through the session's prior (its items, fixed when it started); only ids it lacks
    are looked up in the benchmark, to say whether they are unknown or were added later. One query
    reads the stored scores of the posted items and the log's length."""
    scale = scale_of(benchmark)
    targets = target_indices(row, observations)
    pk_of = {o.item: entry.pk_of_id[o.item] for o in observations if o.item in entry.pk_of_id}
    wanted = list(dict.fromkeys(o.item for o in observations if o.item not in pk_of))
    for start in range(0, len(wanted), 1000):
        chunk = wanted[start:start + 1000]
        pk_of.update(benchmark_repository.pks_of_item_ids(session, row.benchmark_id, chunk))
    unknown = [{"field": f"observations.{k}.item", "item": o.item,
                "detail": f"benchmark {benchmark.name!r} has no item {o.item!r}"}
               for k, o in enumerate(observations) if o.item not in pk_of]
    if unknown:
        raise NotFound(f"unknown item {unknown[0]['item']!r} in benchmark {benchmark.name!r}", unknown)
    invalid = []
    for k, o in enumerate(observations):
        reason = scale.problem(float(o.score))
        if reason is not None:
            invalid.append({"field": f"observations.{k}.score", "item": o.item, "detail": reason})
        elif pk_of[o.item] not in entry.index_of_pk:
            invalid.append({"field": f"observations.{k}.item", "item": o.item,
                            "detail": "the item was added to the benchmark after this session started"})
    if invalid:
        raise InvalidInput(f"invalid observation: {invalid[0]['detail']}", invalid)

    stored, n_stored = session_repository.stored_scores(session, row.id, list({pk_of[o.item] for o in observations}))
    conflicts: list[dict[str, Any]] = []
    new: list[tuple[int, int, str, float]] = []
    seen: dict[tuple[int, int], float] = {}
    for k, (o, t) in enumerate(zip(observations, targets)):
        key, score = (t, pk_of[o.item]), float(o.score)
        before = stored.get(key, seen.get(key))
        if before is None:
            seen[key] = score
            new.append((t, key[1], o.item, score))
        elif before != score:
            whose = f" for target {o.target!r}" if row.targets else ""
            conflicts.append({"field": f"observations.{k}", "item": o.item,
                              "detail": f"item {o.item!r} already has score {before!r}{whose}; got {score!r}",
                              **({"target": o.target} if row.targets else {})})
    if conflicts:
        raise Conflict(f"conflicting score for an already observed item: {conflicts[0]['detail']}", conflicts)
    return new, n_stored


def refuses_unproposed(row: EvalSession) -> bool:
    """Whether the session takes only the items it proposes (issue 32 item 9): a single-target ``random``
    session (its sample mean and exact interval hold for a uniform random sample only), ``refgp`` with the
    difference estimator's design variance (``variance: design_loo``, the former ``refgp_dr``), and a session whose
    ``stop.anytime_valid`` betting confidence sequence assumes uniform random draws (every method but
    ``active_design``, whose own sequence is anytime-valid). Elsewhere any not-yet-observed item is accepted
    (API.md): the model-based methods condition on what was observed, and ``active_design`` counts an item it
    did not propose as known exactly and never as a draw (``design.n_off_design``), which keeps its interval
    valid."""
    if row.targets:
        return False
    config = row.config or {}
    if config.get("compare"):  # a paired session: its interval holds for its random draws only
        return True
    anytime = bool((config.get("stop") or {}).get("anytime_valid"))
    return only_proposed_items(str(row.method), config.get("method_params")) or (
        anytime and row.method != "active_design")


def off_design_conflict(k: int, item: str, proposed: list[str]) -> Conflict:
    """409 for observation ``k`` of an item the session did not propose (``refuses_unproposed``), naming the
    proposed ones."""
    shown = ", ".join(repr(p) for p in proposed[:20]) + (" ..." if len(proposed) > 20 else "")
    return Conflict(f"item {item!r} was not proposed by this session; its interval is valid only for the items it "
                    f"proposes: post one of {shown or '(none)'}",
                    [{"field": f"observations.{k}.item", "item": item, "proposed": proposed[:100],
                      "detail": f"not proposed; the session proposes {shown or 'nothing'}"}])
