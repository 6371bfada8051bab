"""Sequential evaluation sessions (BayesAME, papers/004): create, observe, read, list, trajectory.

State model
-----------
* The estimator is never persisted. A session's state is a pure function of its bucket prior, its
  config and its observations in ``seq`` order; replaying them into a fresh
  ``SequentialEstimator`` rebuilds it on any replica.
* ``eval_sessions`` caches the result of the last write (estimate, ci, next_items, ...), so reads
  never replay.
* The bucket prior of a (benchmark, metric, data version, reference set) is computed once, stored
  in ``session_priors`` and reused; deserialized priors are kept in a small in-process LRU.
* Estimators are cached in-process by (session id, number of stored observations), so the common
  write path applies only the new observations. The key names an exact prefix of the append-only
  observation log, so a cache entry is never stale, even with several replicas.

Multi-target sessions (papers/004 §3.2): ``targets`` (>= 2 names) instead of ``target``; one
``MultiTargetEstimator`` over the shared prior, each observation carries a ``target_index``. The same
storage, locking, replay and caches serve both kinds: only ``_new_estimator``, ``_feed`` and
``_apply_state`` know which kind a session is. See ``session_view`` for the response.

Concurrency: writes to one session serialize on its row (``SELECT .. FOR UPDATE`` on PostgreSQL; on
SQLite an ``UPDATE`` of the row as the transaction's first statement takes SQLite's write lock with
the busy timeout) plus a per-session ``threading.Lock`` in-process. ``post_observations`` therefore
commits itself, inside the lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.sequential import BucketPrior, SequentialEstimator, SessionConfig
from app.core.sequential.multi_target import MultiTargetEstimator
from app.db.models import Benchmark, EvalSession, Item, Model, SessionObservation, SessionPrior
from app.kit.errors import Conflict, InvalidInput, NotFound
from app.benchmarks.service import scale_of
from app.benchmarks.service import get_benchmark
from app.kit.pagination import Page, decode_cursor, encode_cursor, invalid_cursor
from app.benchmarks.score_matrix import load_matrix

METHODS = ("bayesame", "bayesame_rs", "rs_mean")
STATUSES = ("active", "stopped")
CONFIG_FIELDS = ("epsilon1", "epsilon2", "window", "refit_every", "max_items", "batch_size",
                 "hyperparameters", "seed")
PRIOR_CACHE_SIZE = 16
ESTIMATOR_CACHE_SIZE = 128
MAX_OBSERVATIONS_PER_REQUEST = 10_000
MULTI_METHODS = ("bayesame", "bayesame_rs")
MAX_TARGETS = 32  # the joint posterior costs O(T B n) per observation
MAX_LATENT = 16
STOP_REASON_PRECEDENCE = ("max_items", "exhausted", "converged")


# --------------------------------------------------------------------------- in-process caches


@dataclass(frozen=True)
class PriorEntry:
    """A deserialized prior with its item order: column j is item ``item_ids[j]`` (pk ``item_pks[j]``)."""

    key: str
    prior: Any  # BucketPrior
    item_pks: tuple[int, ...]
    item_ids: tuple[str, ...]
    index_of_pk: dict[int, int]


class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def pop(self, key: Any) -> Any:
        with self._lock:
            return self._data.pop(key, None)

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


_priors = _LRU(PRIOR_CACHE_SIZE)
_estimators = _LRU(ESTIMATOR_CACHE_SIZE)
_locks: weakref.WeakValueDictionary[str, threading.Lock] = weakref.WeakValueDictionary()
_locks_guard = threading.Lock()


def clear_caches() -> None:
    """Forget every in-process prior and estimator (what a restart or another replica sees)."""
    _priors.clear()
    _estimators.clear()


@contextmanager
def _session_lock(session_id: str) -> Iterator[None]:
    with _locks_guard:
        lock = _locks.get(session_id)
        if lock is None:
            lock = threading.Lock()
            _locks[session_id] = lock
    with lock:  # the local variable keeps the weak entry alive while held
        yield


# --------------------------------------------------------------------------- create


@dataclass
class SessionRequest:
    benchmark: str
    target: str | None = None
    targets: list[str] | None = None
    n_latent: int | None = None
    reference_models: list[str] | str | None = None
    method: str = "bayesame"
    epsilon1: float | None = None
    epsilon2: float | None = None
    window: int | None = None
    refit_every: int | None = None
    max_items: int | None = None
    batch_size: int | None = None
    hyperparameters: dict[str, float] | None = None
    seed: int | None = None


def _config_of(request: SessionRequest) -> Any:
    if request.method not in METHODS:
        raise InvalidInput(f"unknown method {request.method!r}; valid methods: {', '.join(METHODS)}",
                           [{"field": "method", "detail": f"must be one of {', '.join(METHODS)}"}])
    given = {name: getattr(request, name) for name in CONFIG_FIELDS if getattr(request, name) is not None}
    try:
        config = SessionConfig(method=request.method, **given)
        config.validate()
    except (ValueError, TypeError) as exc:
        message = str(exc)
        head = message.split(":", 1)[0].strip()
        field = head if head in CONFIG_FIELDS + ("method", "n0") else next(
            (f for f in sorted(CONFIG_FIELDS, key=len, reverse=True) if f in message), None)
        raise InvalidInput(f"invalid session configuration: {message}",
                           [{"field": field or "config", "detail": message}]) from None
    return config


def _config_dict(config: Any) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(config)))


def _resolve_target(session: Session, target: str, field: str = "target") -> str:
    target = target.strip() if isinstance(target, str) else target
    if not isinstance(target, str) or not target or len(target) > 300:
        raise InvalidInput(f"{field} must be a model name of 1 to 300 characters",
                           [{"field": field, "detail": f"got {target!r}"}])
    known = session.scalars(select(Model.name).where(Model.id == target)).first()
    return known or target  # an id of a known model stands for its name; any other string is a new model


def _resolve_targets(session: Session, request: SessionRequest) -> tuple[str | None, list[str] | None]:
    """(target, None) for a single-target request, (None, [names]) for a multi-target one."""
    if request.targets is None:
        if request.target is None:
            raise InvalidInput("give target (one model) or targets (two or more models)",
                               [{"field": "target", "detail": "missing"}])
        if request.n_latent is not None:
            raise InvalidInput("n_latent applies to multi-target sessions (targets) only",
                               [{"field": "n_latent", "detail": "not allowed with target"}])
        return _resolve_target(session, request.target), None
    if request.target is not None:
        raise InvalidInput("give either target or targets, not both",
                           [{"field": "targets", "detail": "not allowed with target"}])
    if not isinstance(request.targets, list) or not 2 <= len(request.targets) <= MAX_TARGETS:
        raise InvalidInput(f"targets must list 2 to {MAX_TARGETS} model names",
                           [{"field": "targets", "detail": f"got {request.targets!r}"}])
    names: list[str] = []
    for k, given in enumerate(request.targets):
        name = _resolve_target(session, given, f"targets.{k}")
        if name in names:
            raise InvalidInput(f"targets must be distinct; {name!r} is given twice",
                               [{"field": f"targets.{k}", "detail": f"duplicate of targets.{names.index(name)}"}])
        names.append(name)
    return None, names


def _resolve_references(session: Session, refs: list[str] | str | None, targets: list[str],
                        model_ids: list[str], model_names: list[str]) -> list[int]:
    """Row indices (into the benchmark's score matrix) of the reference models (never a target)."""
    if refs is None or refs == "all":
        rows = [i for i, name in enumerate(model_names) if name not in targets]
    elif isinstance(refs, list) and all(isinstance(r, str) for r in refs):
        row_of_id = {m: i for i, m in enumerate(model_ids)}
        row_of_name = {n: i for i, n in enumerate(model_names)}
        rows, errors = [], []
        for k, ref in enumerate(refs):
            row = row_of_name.get(ref, row_of_id.get(ref))
            if row is None:
                exists = session.scalars(select(Model.id).where((Model.name == ref) | (Model.id == ref))).first()
                errors.append({"field": f"reference_models.{k}",
                               "detail": f"model {ref!r} has no scores on this benchmark" if exists
                               else f"no model with id or name {ref!r}"})
            elif model_names[row] in targets:
                errors.append({"field": f"reference_models.{k}",
                               "detail": f"the target {model_names[row]!r} cannot be its own reference"})
            elif row not in rows:
                rows.append(row)
        if errors:
            raise InvalidInput(f"invalid reference_models: {errors[0]['detail']}", errors)
    else:
        raise InvalidInput('reference_models must be a list of model names or "all"',
                           [{"field": "reference_models", "detail": f"got {refs!r}"}])
    rows.sort()  # canonical (upload) order: the prior is keyed by the set, not the order given
    if len(rows) < 2:
        raise InvalidInput(f"a session needs at least 2 reference models with scores on the benchmark; "
                           f"found {len(rows)}",
                           [{"field": "reference_models", "detail": f"{len(rows)} usable reference model(s)"}])
    return rows


def prior_key(benchmark: Benchmark, metric: str, reference_ids: list[str]) -> str:
    material = json.dumps([benchmark.id, metric, int(benchmark.data_version or 0), sorted(reference_ids)])
    return hashlib.sha256(material.encode()).hexdigest()


def _entry_from_row(session: Session, row: SessionPrior) -> PriorEntry:
    item_pks = tuple(int(p) for p in row.item_pks)
    ids = dict(session.execute(select(Item.pk, Item.item_id).where(Item.pk.in_(item_pks))).all())
    return PriorEntry(row.key, BucketPrior.from_bytes(row.blob), item_pks,
                      tuple(ids.get(p, str(p)) for p in item_pks), {p: j for j, p in enumerate(item_pks)})


def load_prior(session: Session, key: str) -> PriorEntry:
    entry = _priors.get(key)
    if entry is None:
        row = session.get(SessionPrior, key)
        if row is None:
            raise NotFound(f"the prior {key!r} of this session is gone", [{"prior": key, "detail": "missing"}])
        entry = _entry_from_row(session, row)
        _priors.put(key, entry)
    return entry


def _obtain_prior(session: Session, benchmark: Benchmark, metric: str, reference_ids: list[str],
                  reference: np.ndarray, item_pks: list[int], item_ids: list[str]) -> PriorEntry:
    """The stored prior of this reference set, or a new one computed and stored now."""
    key = prior_key(benchmark, metric, reference_ids)
    if session.scalars(select(SessionPrior.key).where(SessionPrior.key == key)).first() is not None:
        return load_prior(session, key)
    prior = BucketPrior.from_reference_scores(reference)
    row = SessionPrior(key=key, benchmark_id=benchmark.id, n_items=int(prior.n_items),
                       n_buckets=int(prior.n_buckets), item_pks=[int(p) for p in item_pks], blob=prior.to_bytes())
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:  # another request stored the same prior first: use theirs
        return load_prior(session, key)
    entry = PriorEntry(key, prior, tuple(item_pks), tuple(item_ids), {p: j for j, p in enumerate(item_pks)})
    _priors.put(key, entry)
    return entry


def create_session(session: Session, request: SessionRequest) -> EvalSession:
    """Validate, obtain the prior, build the estimator and store the session (the caller commits)."""
    benchmark = get_benchmark(session, request.benchmark)
    config = _config_of(request)
    target, targets = _resolve_targets(session, request)
    n_latent = _n_latent_of(request, config) if targets is not None else None
    metric = benchmark.default_metric
    matrix = load_matrix(session, benchmark, metric)
    if not matrix.item_pks:
        raise InvalidInput(f"benchmark {benchmark.name!r} has no items",
                           [{"field": "benchmark", "detail": "upload items or scores first"}])
    rows = _resolve_references(session, request.reference_models, targets or [target], matrix.model_ids,
                               matrix.model_names)
    reference = matrix.values[rows].copy()
    means = np.nanmean(reference, axis=1)
    missing = np.isnan(reference)
    reference[missing] = np.broadcast_to(means[:, None], reference.shape)[missing]
    entry = _obtain_prior(session, benchmark, metric, [matrix.model_ids[i] for i in rows], reference,
                          matrix.item_pks, matrix.item_ids)
    row = EvalSession(benchmark_id=benchmark.id, target=target, targets=targets, n_latent=n_latent,
                      reference_models=[matrix.model_names[i] for i in rows], method=config.method,
                      config=_config_dict(config), status="active", n_observed=0, prior_key=entry.key)
    estimator = _new_estimator(row, entry, benchmark)
    _apply_state(row, estimator, entry)
    session.add(row)
    session.flush()
    _estimators.put((row.id, 0), estimator)
    return row


def _n_latent_of(request: SessionRequest, config: Any) -> int:
    if config.method not in MULTI_METHODS:
        raise InvalidInput(f"multi-target sessions support the methods {', '.join(MULTI_METHODS)}; "
                           f"got {config.method!r}",
                           [{"field": "method", "detail": f"must be one of {', '.join(MULTI_METHODS)} with targets"}])
    n_latent = 2 if request.n_latent is None else request.n_latent
    if isinstance(n_latent, bool) or not isinstance(n_latent, int) or not 1 <= n_latent <= MAX_LATENT:
        raise InvalidInput(f"n_latent must be an integer from 1 to {MAX_LATENT}",
                           [{"field": "n_latent", "detail": f"got {n_latent!r}"}])
    return n_latent


# --------------------------------------------------------------------------- state


def _new_estimator(row: EvalSession, entry: PriorEntry, benchmark: Benchmark) -> Any:
    """A fresh estimator of the session (no observations): single- or multi-target."""
    config = SessionConfig(**row.config)
    if not row.targets:
        return SequentialEstimator(entry.prior, config)
    return MultiTargetEstimator(entry.prior, config, len(row.targets), int(row.n_latent or 2),
                                continuous=benchmark.score_kind != "binary")


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda v: v.tolist() if isinstance(v, np.ndarray) else float(v)))


def session_stop_reason(reasons: list[str | None]) -> str | None:
    """A multi-target session's ``stop_reason`` once all targets stopped: ``converged`` only if every
    target converged, else the first of ``max_items``, ``exhausted`` that some target stopped on (what
    cut the session short). ``None`` while any target is active."""
    if any(r is None for r in reasons):
        return None
    return next(r for r in STOP_REASON_PRECEDENCE if r in reasons)


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _apply_state(row: EvalSession, estimator: Any, entry: PriorEntry) -> None:
    if row.targets:
        _apply_multi_state(row, estimator, entry)
        return
    row.n_observed = int(estimator.n_observed)
    row.estimate = _finite(estimator.estimate)
    row.variance = _finite(estimator.variance)
    lo, hi = estimator.ci
    row.ci_lo, row.ci_hi = _finite(lo), _finite(hi)
    row.hyperparameters = json.loads(json.dumps(estimator.hyperparameters, default=float)) \
        if estimator.hyperparameters is not None else None
    row.status = "stopped" if estimator.stopped else "active"
    row.stop_reason = estimator.stop_reason if estimator.stopped else None
    row.next_items = [] if estimator.stopped else [entry.item_ids[j] for j in estimator.propose()]


def _apply_multi_state(row: EvalSession, estimator: MultiTargetEstimator, entry: PriorEntry) -> None:
    """The multi-target cache: the single-target columns hold the session-level view (estimate,
    variance, ci null), ``target_state`` the per-target one and the (target, item) proposals."""
    names = list(row.targets or [])
    row.n_observed = int(estimator.n_total_observed)
    row.estimate = row.variance = row.ci_lo = row.ci_hi = None
    row.hyperparameters = _jsonable(estimator.hyperparameters)
    row.status = "stopped" if estimator.all_stopped else "active"
    row.stop_reason = session_stop_reason(list(estimator.stop_reasons))
    proposals = estimator.propose()
    row.next_items = [entry.item_ids[j] for _, j in proposals]
    cis = estimator.cis
    per_target = {
        name: {"status": "stopped" if estimator.stopped[t] else "active", "stop_reason": estimator.stop_reasons[t],
               "n_observed": int(estimator.n_observed[t]), "estimate": _finite(estimator.estimates[t]),
               "variance": _finite(estimator.variances[t]), "ci": [_finite(cis[t][0]), _finite(cis[t][1])]}
        for t, name in enumerate(names)}
    row.target_state = {"per_target": per_target,
                        "next": [{"target": names[t], "item": entry.item_ids[j]} for t, j in proposals]}


def _feed(estimator: Any, target_index: int, index: int, score: float) -> bool:
    """Apply one observation unless the estimator (or, multi-target, that target) has stopped; then
    it is stored, not used."""
    if isinstance(estimator, MultiTargetEstimator):
        if estimator.stopped[target_index]:
            return False
        estimator.observe(target_index, index, score)
        return True
    if estimator.stopped:
        return False
    estimator.observe(index, score)
    return True


def _replay(session: Session, row: EvalSession, entry: PriorEntry, upto: int | None = None) -> Any:
    benchmark = session.get(Benchmark, row.benchmark_id)
    assert benchmark is not None
    estimator = _new_estimator(row, entry, benchmark)
    stmt = (select(SessionObservation.target_index, SessionObservation.item_pk, SessionObservation.score)
            .where(SessionObservation.session_id == row.id).order_by(SessionObservation.seq))
    if upto is not None:
        stmt = stmt.where(SessionObservation.seq < upto)
    for target_index, item_pk, score in session.execute(stmt):
        _feed(estimator, int(target_index), entry.index_of_pk[int(item_pk)], float(score))
    return estimator


def _n_stored(session: Session, session_id: str) -> int:
    return int(session.scalar(select(func.count()).select_from(SessionObservation)
                              .where(SessionObservation.session_id == session_id)) or 0)


def estimator_of(session: Session, row: EvalSession, *, for_update: bool = False) -> tuple[Any, int]:
    """(estimator, number of stored observations). With ``for_update`` the caller owns the object."""
    n = _n_stored(session, row.id)
    key = (row.id, n)
    estimator = _estimators.pop(key) if for_update else _estimators.get(key)
    if estimator is None:
        estimator = _replay(session, row, load_prior(session, row.prior_key))
        if not for_update:
            _estimators.put(key, estimator)
    return estimator, n


# --------------------------------------------------------------------------- observe


@dataclass
class ObservationIn:
    item: str
    score: float
    target: str | None = None  # required for (and only for) a multi-target session


def _lock_row(session: Session, session_id: str) -> EvalSession:
    if session.get_bind().dialect.name == "sqlite":
        # The first statement of the transaction is a write: SQLite's write lock is taken now
        # (waiting out the busy timeout), before any read could pin an older snapshot.
        session.execute(text("UPDATE eval_sessions SET n_observed = n_observed WHERE id = :id"), {"id": session_id})
    row = session.get(EvalSession, session_id, with_for_update=True, populate_existing=True)
    if row is None:
        raise NotFound(f"session {session_id!r} does not exist",
                       [{"parameter": "session_id", "detail": f"no session with id {session_id!r}"}])
    return row


def post_observations(session: Session, session_id: str, observations: list[ObservationIn]) -> EvalSession:
    """Record observations all-or-nothing and advance the estimator. Commits (inside the row lock)."""
    if not observations:
        raise InvalidInput("no observations given", [{"field": "observations", "detail": "empty"}])
    if len(observations) > MAX_OBSERVATIONS_PER_REQUEST:
        raise InvalidInput(f"at most {MAX_OBSERVATIONS_PER_REQUEST} observations per request",
                           [{"field": "observations", "detail": f"got {len(observations)}"}])
    with _session_lock(session_id):
        try:
            row = _lock_row(session, session_id)
            if row.status == "stopped":
                raise Conflict(f"session {row.id} has stopped ({row.stop_reason}); it takes no more observations",
                               [{"field": "observations", "detail": f"status is stopped ({row.stop_reason})"}])
            new = _validate_observations(session, row, observations)
            cached = _record(session, row, new) if new else None
            session.commit()
        except BaseException:
            session.rollback()
            raise
        if cached is not None:
            _estimators.put(*cached)
        return row


def _target_indices(row: EvalSession, observations: list[ObservationIn]) -> list[int]:
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


def _validate_observations(session: Session, row: EvalSession,
                           observations: list[ObservationIn]) -> list[tuple[int, int, str, float]]:
    """The new (target_index, item_pk, item_id, score) to record, in request order; raises on any problem."""
    benchmark = session.get(Benchmark, row.benchmark_id)
    assert benchmark is not None
    scale = scale_of(benchmark)
    targets = _target_indices(row, observations)
    wanted = list(dict.fromkeys(o.item for o in observations))
    pk_of: dict[str, int] = {}
    for start in range(0, len(wanted), 1000):
        chunk = wanted[start:start + 1000]
        pk_of.update(session.execute(select(Item.item_id, Item.pk).where(
            Item.benchmark_id == row.benchmark_id, Item.item_id.in_(chunk))).all())
    unknown = [{"field": f"observations.{k}.item", "item": o.item,
                "detail": f"benchmark {benchmark.name!r} has no item {o.item!r}"}
               for k, o in enumerate(observations) if o.item not in pk_of]
    if unknown:
        raise NotFound(f"unknown item {unknown[0]['item']!r} in benchmark {benchmark.name!r}", unknown)
    entry = load_prior(session, row.prior_key)
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

    pks = list({pk_of[o.item] for o in observations})
    stored: dict[tuple[int, int], float] = {}
    for start in range(0, len(pks), 1000):
        stored.update(((int(t), int(pk)), score) for t, pk, score in session.execute(
            select(SessionObservation.target_index, SessionObservation.item_pk, SessionObservation.score).where(
                SessionObservation.session_id == row.id,
                SessionObservation.item_pk.in_(pks[start:start + 1000]))))
    conflicts, new, seen = [], [], {}
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
    return new


def _record(session: Session, row: EvalSession,
            new: list[tuple[int, int, str, float]]) -> tuple[tuple[str, int], Any]:
    """Store the observations, advance the estimator and the row; returns the cache entry to keep
    once the transaction commits."""
    entry = load_prior(session, row.prior_key)
    estimator, n = estimator_of(session, row, for_update=True)
    for k, (t, pk, item_id, score) in enumerate(new):
        session.add(SessionObservation(session_id=row.id, seq=n + k, target_index=t, item_pk=pk, item_id=item_id,
                                       score=score))
        _feed(estimator, t, entry.index_of_pk[pk], score)
    _apply_state(row, estimator, entry)
    session.flush()
    return (row.id, n + len(new)), estimator


# --------------------------------------------------------------------------- read


def get_session(session: Session, session_id: str) -> EvalSession:
    row = session.get(EvalSession, session_id)
    if row is None:
        raise NotFound(f"session {session_id!r} does not exist",
                       [{"parameter": "session_id", "detail": f"no session with id {session_id!r}"}])
    return row


def _iso(value: datetime | None) -> str | None:
    """UTC ISO 8601 (SQLite hands back naive datetimes; every stored time is UTC)."""
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).isoformat()


def session_view(session: Session, row: EvalSession, benchmark_name: str | None = None) -> dict[str, Any]:
    """The API.md session. A multi-target session keeps every single-target field (``target``,
    ``estimate``, ``variance`` and ``ci`` null; ``next_items`` the item ids of ``next`` in order;
    ``n_observed`` the observations used, over all targets; ``status`` stopped once every target
    stopped, ``stop_reason`` as ``session_stop_reason``) and adds ``targets``, ``n_latent``,
    ``next: [{target, item}]`` and ``per_target: {name: {status, stop_reason, n_observed, estimate,
    variance, ci}}``."""
    if benchmark_name is None:
        benchmark = session.get(Benchmark, row.benchmark_id)
        benchmark_name = benchmark.name if benchmark is not None else row.benchmark_id
    view = {
        "id": row.id, "benchmark": benchmark_name, "target": row.target, "status": row.status,
        "stop_reason": row.stop_reason, "next_items": list(row.next_items or []), "n_observed": row.n_observed,
        "estimate": row.estimate, "variance": row.variance, "ci": [row.ci_lo, row.ci_hi],
        "method": row.method, "config": row.config, "hyperparameters": row.hyperparameters,
        "reference_models": row.reference_models,
        "created_at": _iso(row.created_at), "updated_at": _iso(row.updated_at),
    }
    if row.targets:
        state = row.target_state or {}
        view["ci"] = None
        view.update(targets=list(row.targets), n_latent=row.n_latent, next=list(state.get("next", [])),
                    per_target=dict(state.get("per_target", {})))
    return view


def trajectory(session: Session, row: EvalSession) -> list[dict[str, Any]]:
    """One row per observation used by the estimator: ``{n, estimate, variance, ci}``; multi-target
    rows lead with ``target`` (its name) and count ``n`` per target."""
    estimator, _ = estimator_of(session, row)
    if row.targets:
        return [{"target": row.targets[int(r["target"])], "n": int(r["n"]), "estimate": _finite(r["estimate"]),
                 "variance": _finite(r["variance"]), "ci": [_finite(r["ci"][0]), _finite(r["ci"][1])]}
                for r in list(estimator.trajectory)]
    rows = [r for r in list(estimator.trajectory) if 1 <= int(r["n"]) <= row.n_observed]
    return [{"n": int(r["n"]), "estimate": _finite(r["estimate"]), "variance": _finite(r["variance"]),
             "ci": [_finite(r["ci"][0]), _finite(r["ci"][1])]} for r in rows]


def list_sessions(session: Session, *, limit: int, cursor: str | None, benchmark: str | None = None,
                  target: str | None = None, status: str | None = None) -> Page[EvalSession]:
    after = decode_cursor(cursor)
    if after is not None and not isinstance(after, str):
        raise invalid_cursor("not a session cursor")
    if status is not None and status not in STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(STATUSES)}",
                           [{"parameter": "status", "detail": f"got {status!r}"}])
    stmt = select(EvalSession).order_by(EvalSession.id.desc()).limit(limit + 1)
    if after is not None:
        stmt = stmt.where(EvalSession.id < after)
    if benchmark is not None:
        stmt = stmt.where(EvalSession.benchmark_id == get_benchmark(session, benchmark).id)
    if target is not None:
        stmt = stmt.where(EvalSession.target == target)
    if status is not None:
        stmt = stmt.where(EvalSession.status == status)
    rows = list(session.scalars(stmt))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, encode_cursor(rows[-1].id) if more else None)


def benchmark_names(session: Session, benchmark_ids: list[str]) -> dict[str, str]:
    if not benchmark_ids:
        return {}
    return dict(session.execute(select(Benchmark.id, Benchmark.name)
                                .where(Benchmark.id.in_(set(benchmark_ids)))).all())
