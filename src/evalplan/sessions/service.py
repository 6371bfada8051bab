"""Sequential evaluation sessions (BayesAME, papers/004): create, observe, read.

Checks are ``validation``, prior storage ``priors``, the estimator <-> row mapping ``state``,
in-process caches and locks ``cache``, responses and listing ``views``.

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
  observation log, so a cache entry is never stale, even with several replicas. A post's log length
  is read in the same query as the posted items' stored scores (``validation.stored_scores``).

Multi-target sessions (papers/004 §3.2): ``targets`` (>= 2 names) instead of ``target``; one
``MultiTargetEstimator`` over the shared prior, each observation carries a ``target_index``. The same
storage, locking, replay and caches serve both kinds: only ``evalplan.sessions.state`` knows which
kind a session is. See ``evalplan.sessions.views.session_view`` for the response.

Concurrency: writes to one session serialize on its row (``SELECT .. FOR UPDATE`` on PostgreSQL; on
SQLite an ``UPDATE`` of the row as the transaction's first statement takes SQLite's write lock with
the busy timeout) plus a per-session ``threading.Lock`` in-process. ``post_observations`` therefore
commits itself, inside the lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from evalplan.auth.audit import record
from evalplan.auth.scoping import require_own
from evalplan.benchmarks.score_matrix import load_matrix
from evalplan.benchmarks.service import get_benchmark, score_range
from evalplan.core.sequential.checkpoints import with_previous
from evalplan.core.sequential.methods import needs_levels
from evalplan.db.models import Benchmark, EvalSession, SessionObservation
from evalplan.kit.errors import Conflict, InvalidInput, NotFound
from evalplan.sessions import cache
from evalplan.sessions.priors import PriorEntry, load_prior, obtain_prior, persist_derived
from evalplan.sessions.repository import locked_with_benchmark
from evalplan.sessions.schemas import SessionCreate
from evalplan.sessions.state import apply_state, drawn_probability, feed, new_estimator, replay
from evalplan.sessions.validation import (
    MAX_OBSERVATIONS_PER_REQUEST,
    ObservationIn,
    check_sizes,
    check_stop_fits,
    check_working_model_cost,
    config_dict,
    config_of,
    n_latent_of,
    off_design_conflict,
    previous_scores,
    refuses_unproposed,
    resolve_compare,
    resolve_previous,
    resolve_references,
    resolve_targets,
    validate_observations,
)


def create_session(session: Session, request: SessionCreate) -> EvalSession:
    """Validate the request body (the route's ``SessionCreate``), obtain the prior, build the estimator
    and store the session (the caller commits)."""
    benchmark = get_benchmark(session, request.benchmark)
    metric = benchmark.default_metric
    matrix = load_matrix(session, benchmark, metric)
    if not matrix.item_pks:
        raise InvalidInput(f"benchmark {benchmark.name!r} has no items",
                           [{"field": "benchmark", "detail": "upload items or scores first"}])
    config = config_of(request, len(matrix.item_pks))
    check_sizes(config, len(matrix.item_pks))
    target, targets = resolve_targets(session, request)
    n_latent = n_latent_of(request, config) if targets is not None else None
    check_stop_fits(config, benchmark, targets is not None)
    compare = resolve_compare(session, request, benchmark, target, matrix.model_names, matrix.values, matrix.item_pks)
    if compare is not None:
        config = dataclasses.replace(config, compare=compare[0])
    previous = resolve_previous(session, request.previous, targets or [str(target)])
    rows = resolve_references(session, request.reference_models, targets or [str(target)], matrix.model_ids,
                              matrix.model_names, previous)
    check_working_model_cost(config, len(rows), len(matrix.item_pks))
    reference = matrix.values[rows].copy()
    means = np.nanmean(reference, axis=1)
    missing = np.isnan(reference)
    reference[missing] = np.broadcast_to(means[:, None], reference.shape)[missing]
    prior_ids = [matrix.model_ids[i] for i in rows]
    if previous:  # earlier checkpoints join the references with a weight (evalplan.core.sequential.checkpoints)
        checkpoints = previous_scores(session, benchmark, previous, matrix.model_names, matrix.values,
                                      matrix.item_pks)
        reference, mult = with_previous(reference, checkpoints, score_range(benchmark, infinite=True))
        token = hashlib.sha256(np.ascontiguousarray(reference[len(rows):]).tobytes()).hexdigest()[:16]
        prior_ids = prior_ids + [f"previous:{name}:{m}:{token}" for name, m in zip(previous, mult)]
        config = dataclasses.replace(config, previous=[
            {"model": name, "n_scores": int(np.sum(~np.isnan(c))), "weight": m}
            for name, c, m in zip(previous, checkpoints, mult)])
    entry = obtain_prior(session, benchmark, metric, prior_ids, reference, matrix.item_pks, matrix.item_ids,
                         levels=needs_levels(config) and targets is None)
    row = EvalSession(benchmark_id=benchmark.id, target=target, targets=targets, n_latent=n_latent,
                      reference_models=[matrix.model_names[i] for i in rows], method=config.method,
                      config=config_dict(config), status="active", n_observed=0, prior_key=entry.key)
    if compare is not None:  # the comparator's scores, fixed now (a replay reads them back)
        row.target_state = {"compare_scores": [None if np.isnan(v) else float(v) for v in compare[1].tolist()]}
    estimator = new_estimator(row, entry, benchmark)
    persist_derived(session, entry)  # features / calibration computed now: every worker starts warm from here
    apply_state(row, estimator, entry)
    session.add(row)
    session.flush()
    cache.estimators.put((row.id, 0), estimator)
    return row


def session_not_found(session_id: str) -> NotFound:
    return NotFound(f"session {session_id!r} does not exist",
                    [{"parameter": "session_id", "detail": f"no session with id {session_id!r}"}])


def get_eval_session(session: Session, session_id: str) -> EvalSession:
    """The evaluation session ``session_id`` (404 when there is none)."""
    row = session.get(EvalSession, session_id)
    if row is None:
        raise session_not_found(session_id)
    return row


def _lock_row(session: Session, session_id: str) -> EvalSession:
    if session.get_bind().dialect.name == "sqlite":
        # The first statement of the transaction is a write: SQLite's write lock is taken now
        # (waiting out the busy timeout), before any read could pin an older snapshot.
        session.execute(text("UPDATE eval_sessions SET n_observed = n_observed WHERE id = :id"), {"id": session_id})
    row = session.get(EvalSession, session_id, with_for_update=True, populate_existing=True)
    if row is None:
        raise session_not_found(session_id)
    require_own(session, row, f"session {session_id!r}")
    return row


def _lock_row_with_benchmark(session: Session, session_id: str) -> tuple[EvalSession, Benchmark, str | None]:
    """The session's row, locked (as ``_lock_row``), its benchmark and its team's name, in one round trip."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(text("UPDATE eval_sessions SET n_observed = n_observed WHERE id = :id"), {"id": session_id})
    found = locked_with_benchmark(session, session_id)
    if found is None:
        raise session_not_found(session_id)
    row, benchmark, team = found
    require_own(session, row, f"session {session_id!r}")
    return row, benchmark, team


@dataclass
class Posted:
    """What ``post_observations`` returns: the updated row, its benchmark and team name (for the response)."""

    row: EvalSession
    benchmark: Benchmark
    team: str | None


def post_observations(session: Session, session_id: str, observations: list[ObservationIn]) -> Posted:
    """Record observations all-or-nothing and advance the estimator. Commits (inside the row lock).

    Round trips on PostgreSQL: the row lock (with the benchmark), the stored scores of the posted
    items with the log's length, the INSERT, the UPDATE of the row and the COMMIT. The estimator
    comes from the in-process cache when its key (session, log length) matches, else from a replay."""
    if not observations:
        raise InvalidInput("no observations given", [{"field": "observations", "detail": "empty"}])
    if len(observations) > MAX_OBSERVATIONS_PER_REQUEST:
        raise InvalidInput(f"at most {MAX_OBSERVATIONS_PER_REQUEST} observations per request",
                           [{"field": "observations", "detail": f"got {len(observations)}"}])
    with cache.session_lock(session_id):
        try:
            row, benchmark, team = _lock_row_with_benchmark(session, session_id)
            if row.status == "stopped":
                raise Conflict(f"session {row.id} has stopped ({row.stop_reason}); it takes no more observations",
                               [{"field": "observations", "detail": f"status is stopped ({row.stop_reason})"}])
            entry = load_prior(session, row.prior_key)
            new, n_stored = validate_observations(session, row, benchmark, entry, observations)
            position: dict[str, int] = {}  # item id -> its first index in the request (the located 409 names it)
            for k, o in enumerate(observations):
                position.setdefault(o.item, k)
            cached = _record(session, row, benchmark, entry, new, n_stored, position) if new else None
            session.commit()
        except BaseException:
            session.rollback()
            raise
        if cached is not None:
            cache.estimators.put(*cached)
        return Posted(row, benchmark, team)


def _record(session: Session, row: EvalSession, benchmark: Benchmark, entry: PriorEntry,
            new: list[tuple[int, int, str, float]], n: int,
            position: dict[str, int] | None = None) -> tuple[tuple[str, int], Any, int | None]:
    """Store the observations, advance the estimator and the row; returns the cache entry (key,
    estimator, its byte size when known) to keep once the transaction commits. A session that takes only the
    items it proposes (``validation.refuses_unproposed``) accepts the ones proposed when the request came or
    after its earlier observations; any other is 409 (issue 32 item 9), nothing stored."""
    estimator, nbytes = cache.take_estimator((row.id, n))
    if estimator is None:
        estimator = replay(session, row, entry, benchmark)
    rows = [SessionObservation(session_id=row.id, seq=n + k, target_index=t, item_pk=pk, item_id=item_id, score=score)
            for k, (t, pk, item_id, score) in enumerate(new)]
    guard = refuses_unproposed(row)
    proposed = set(row.next_items or [])  # what the session proposed when the request came
    for obs, (t, pk, item_id, score) in zip(rows, new):
        if guard and not estimator.stopped and item_id not in proposed:
            now = [entry.item_ids[j] for j in estimator.propose()]  # after this request's earlier observations
            if item_id not in now:
                named = list(dict.fromkeys([*(row.next_items or []), *now]))
                raise off_design_conflict((position or {}).get(item_id, 0), item_id, named)
            proposed.update(now)
        if feed(estimator, t, entry.index_of_pk[pk], score):
            obs.probability = drawn_probability(estimator)
    session.add_all(rows)
    apply_state(row, estimator, entry)
    session.flush()
    total = n + len(new)
    if nbytes is not None and (total & (total - 1) == 0 or total // 64 != n // 64):
        nbytes = None  # measured again (nbytes_of walks the object) at powers of two and every 64
    return (row.id, total), estimator, nbytes


def delete_session(session: Session, session_id: str) -> None:
    """Delete a session and its observations (audited); its estimator leaves the cache."""
    with cache.session_lock(session_id):
        row = _lock_row(session, session_id)
        record(session, "delete", "session", row.id, benchmark_id=row.benchmark_id, target=row.target)
        session.delete(row)
        session.commit()
        for n in range(row.n_observed + 1):
            cache.estimators.pop((row.id, n))
