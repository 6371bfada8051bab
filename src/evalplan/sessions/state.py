"""Mapping between a session's estimator and its rows: a fresh estimator, replay of the stored
observations, the cached columns of ``eval_sessions`` written after every change.

Only this module knows whether a session is single-target (``make_estimator``: the method table
``evalplan.core.sequential.methods.METHOD_SPECS``) or
multi-target (``MultiTargetEstimator``, papers/004 §3.2).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evalplan.benchmarks import service as benchmarks
from evalplan.benchmarks.repository import benchmark_by_id
from evalplan.core.sequential import SessionConfig, make_estimator
from evalplan.core.sequential.multi_target import MultiTargetEstimator
from evalplan.core.sequential.paired import PairedSession
from evalplan.core.sequential.stopping import PrecisionSession
from evalplan.db.models import Benchmark, EvalSession, SessionObservation
from evalplan.kit.validation import finite_or_none
from evalplan.sessions import cache
from evalplan.sessions.priors import PriorEntry, load_prior

STOP_REASON_PRECEDENCE = ("max_items", "exhausted", "converged", "precision")


def new_estimator(row: EvalSession, entry: PriorEntry, benchmark: Benchmark) -> Any:
    """A fresh estimator of the session (no observations): single- or multi-target."""
    config = SessionConfig(**row.config)
    score_range = benchmarks.score_range(benchmark, infinite=True)
    if config.compare is not None:  # a paired session (compare_to): its own design, interval and decision stop
        rule = config.stop_rule
        scores = np.array([np.nan if v is None else float(v) for v in (row.target_state or {})["compare_scores"]])
        return PairedSession(scores, score_range=score_range, level=config.level, delta=config.compare.get("delta"),
                             min_items=rule.min_items if rule is not None else 10,
                             half_width=rule.half_width if rule is not None else 0.0, max_items=config.max_items,
                             seed=config.seed, batch_size=config.batch_size)
    if not row.targets:
        return PrecisionSession(make_estimator(entry.prior, config, score_range), level=config.level,
                                rule=config.stop_rule, score_range=score_range, seed=config.seed,
                                batch_size=config.batch_size, max_items=config.max_items)
    multi = MultiTargetEstimator(entry.prior, config, len(row.targets), int(row.n_latent or 2),
                                 continuous=benchmark.score_kind != "binary")
    multi.score_range = score_range
    return multi


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda v: v.tolist() if isinstance(v, np.ndarray) else float(v)))


def session_stop_reason(reasons: list[str | None]) -> str | None:
    """A multi-target session's ``stop_reason`` once all targets stopped: ``converged`` only if every
    target converged, else the first of ``max_items``, ``exhausted`` that some target stopped on (what
    cut the session short). ``None`` while any target is active."""
    if any(r is None for r in reasons):
        return None
    return next(r for r in STOP_REASON_PRECEDENCE if r in reasons)


def apply_state(row: EvalSession, estimator: Any, entry: PriorEntry) -> None:
    if row.targets:
        _apply_multi_state(row, estimator, entry)
        return
    row.n_observed = int(estimator.n_observed)
    row.estimate = finite_or_none(estimator.estimate)
    row.variance = finite_or_none(estimator.variance)
    lo, hi = estimator.ci
    row.ci_lo, row.ci_hi = finite_or_none(lo), finite_or_none(hi)
    row.hyperparameters = json.loads(json.dumps(estimator.hyperparameters, default=float)) \
        if estimator.hyperparameters is not None else None
    design = (row.hyperparameters or {}).get("design")
    if isinstance(design, dict):  # a design-based method: how many observations were not its draws
        design["n_off_design"] = n_off_design(estimator)
    row.status = "stopped" if estimator.stopped else "active"
    row.stop_reason = estimator.stop_reason if estimator.stopped else None
    row.next_items = [] if estimator.stopped else [entry.item_ids[j] for j in estimator.propose()]


def n_off_design(estimator: Any) -> int:
    """Observations of items the design did not propose (issue 32 item 9): in ``active_design`` they are known
    exactly and enter no design term, so their recorded probability is None."""
    return sum(1 for r in getattr(estimator, "trajectory", ()) if "probability" in r and r["probability"] is None)


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
               "n_observed": int(estimator.n_observed[t]), "estimate": finite_or_none(estimator.reported_estimate(t)),
               "variance": finite_or_none(estimator.variances[t]), "ci": [finite_or_none(cis[t][0]),
                                                                          finite_or_none(cis[t][1])]}
        for t, name in enumerate(names)}
    row.target_state = {"per_target": per_target,
                        "next": [{"target": names[t], "item": entry.item_ids[j]} for t, j in proposals]}


def feed(estimator: Any, target_index: int, index: int, score: float) -> bool:
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


def drawn_probability(estimator: Any) -> float | None:
    """The inclusion probability of the observation just fed (a design-based method's draw), else None."""
    trajectory = getattr(estimator, "trajectory", None)
    if isinstance(estimator, MultiTargetEstimator) or not trajectory:
        return None
    value = trajectory[-1].get("probability")
    return None if value is None else float(value)


def replay(session: Session, row: EvalSession, entry: PriorEntry, benchmark: Benchmark | None = None,
           upto: int | None = None) -> Any:
    """A fresh estimator fed the stored observations in ``seq`` order (those before ``upto``)."""
    if benchmark is None:
        benchmark = benchmark_by_id(session, row.benchmark_id)
    assert benchmark is not None
    estimator = new_estimator(row, entry, benchmark)
    stmt = (select(SessionObservation.target_index, SessionObservation.item_pk, SessionObservation.score)
            .where(SessionObservation.session_id == row.id).order_by(SessionObservation.seq))
    if upto is not None:
        stmt = stmt.where(SessionObservation.seq < upto)
    for target_index, item_pk, score in session.execute(stmt):
        feed(estimator, int(target_index), entry.index_of_pk[int(item_pk)], float(score))
    return estimator


def _n_stored(session: Session, session_id: str) -> int:
    return int(session.scalar(select(func.count()).select_from(SessionObservation)
                              .where(SessionObservation.session_id == session_id)) or 0)


def estimator_of(session: Session, row: EvalSession, *, for_update: bool = False) -> tuple[Any, int]:
    """(estimator, number of stored observations). With ``for_update`` the caller owns the object."""
    n = _n_stored(session, row.id)
    key = (row.id, n)
    estimator = cache.estimators.pop(key) if for_update else cache.estimators.get(key)
    if estimator is None:
        estimator = replay(session, row, load_prior(session, row.prior_key))
        if not for_update:
            cache.estimators.put(key, estimator)
    return estimator, n
