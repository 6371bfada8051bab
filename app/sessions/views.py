"""What sessions look like from outside: the API.md session, its trajectory, its observations, the
true score when known, and listing."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import bindparam, select, text
from sqlalchemy.orm import Session

from app.benchmarks.service import get_benchmark
from app.core.sequential.stopping import DEFAULT_LEVEL
from app.db.models import Benchmark, EvalSession, SessionObservation
from app.kit.errors import InvalidInput
from app.kit.pagination import Page, keyset_page
from app.kit.validation import finite_or_none
from app.sessions.priors import load_prior
from app.sessions.state import estimator_of
from app.teams.service import team_name

STATUSES = ("active", "stopped")


def session_view(session: Session, row: EvalSession, benchmark_name: str | None = None,
                 team: str | None = None) -> dict[str, Any]:
    """The API.md session. A multi-target session keeps every single-target field (``target``,
    ``estimate``, ``variance`` and ``ci`` null; ``next_items`` the item ids of ``next`` in order;
    ``n_observed`` the observations used, over all targets; ``status`` stopped once every target
    stopped, ``stop_reason`` as ``session_stop_reason``) and adds ``targets``, ``n_latent``,
    ``next: [{target, item}]`` and ``per_target: {name: {status, stop_reason, n_observed, estimate,
    variance, ci}}``. ``benchmark_name`` and ``team`` (the team's name), when the caller has them,
    save their queries."""
    if benchmark_name is None:
        benchmark = session.get(Benchmark, row.benchmark_id)
        benchmark_name = benchmark.name if benchmark is not None else row.benchmark_id
    view = {
        "id": row.id, "benchmark": benchmark_name, "target": row.target, "status": row.status,
        "stop_reason": row.stop_reason, "next_items": list(row.next_items or []), "n_observed": row.n_observed,
        "estimate": row.estimate, "variance": row.variance, "ci": [row.ci_lo, row.ci_hi],
        "level": float((row.config or {}).get("level") or DEFAULT_LEVEL),
        "previous": [p["model"] for p in (row.config or {}).get("previous") or []] or None,
        "method": row.method, "config": row.config, "hyperparameters": row.hyperparameters,
        "reference_models": row.reference_models,
        "created_at": row.created_at, "updated_at": row.updated_at,
        "team": team or team_name(session, row.team_id), "visibility": row.visibility,
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
        return [{"target": row.targets[int(r["target"])], "n": int(r["n"]), "estimate": finite_or_none(r["estimate"]),
                 "variance": finite_or_none(r["variance"]), "ci": [finite_or_none(r["ci"][0]),
                                                                   finite_or_none(r["ci"][1])]}
                for r in list(estimator.trajectory)]
    rows = [r for r in list(estimator.trajectory) if 1 <= int(r["n"]) <= row.n_observed]
    return [{"n": int(r["n"]), "estimate": finite_or_none(r["estimate"]), "variance": finite_or_none(r["variance"]),
             "ci": [finite_or_none(r["ci"][0]), finite_or_none(r["ci"][1])]} for r in rows]


def list_sessions(session: Session, *, limit: int, cursor: str | None, benchmark: str | None = None,
                  target: str | None = None, status: str | None = None) -> Page[EvalSession]:
    """Sessions, newest first; ``target`` matches single-target sessions only."""
    if status is not None and status not in STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(STATUSES)}",
                           [{"parameter": "status", "detail": f"got {status!r}"}])
    stmt = select(EvalSession)
    if benchmark is not None:
        stmt = stmt.where(EvalSession.benchmark_id == get_benchmark(session, benchmark).id)
    if target is not None:
        stmt = stmt.where(EvalSession.target == target)
    if status is not None:
        stmt = stmt.where(EvalSession.status == status)
    return keyset_page(session, stmt, EvalSession.id, limit=limit, cursor=cursor, what="session", descending=True)


def benchmark_names(session: Session, benchmark_ids: list[str]) -> dict[str, str]:
    if not benchmark_ids:
        return {}
    return dict(session.execute(select(Benchmark.id, Benchmark.name)
                                .where(Benchmark.id.in_(set(benchmark_ids)))).all())


def list_observations(session: Session, row: EvalSession, *, limit: int, cursor: str | None) -> Page[dict[str, Any]]:
    """The posted observations, newest first: ``{n, item, score, target, created_at}`` with ``n`` the
    1-based arrival order over the session (all targets)."""
    stmt = select(SessionObservation).where(SessionObservation.session_id == row.id)
    page = keyset_page(session, stmt, SessionObservation.seq, limit=limit, cursor=cursor, what="observation",
                       descending=True)
    names: list[str] = list(row.targets or [row.target or ""])
    return Page([{"n": o.seq + 1, "item": o.item_id, "score": o.score, "target": names[o.target_index],
                  "created_at": o.created_at} for o in page.items], page.next_cursor)


def true_scores(session: Session, row: EvalSession) -> dict[str, float | None]:
    """Per target: its full-benchmark score (the mean of its stored scores over the session's items,
    the estimand), known only when the target has a stored score for every one of those items."""
    benchmark = session.get(Benchmark, row.benchmark_id)
    entry = load_prior(session, row.prior_key)
    names: list[str] = list(row.targets or [row.target or ""])
    found: dict[str, float | None] = dict.fromkeys(names)
    if benchmark is None or not entry.item_pks:
        return found
    sql = ("SELECT m.name, s.item_pk, s.value FROM scores s JOIN models m ON m.id = s.model_id "
           "JOIN items i ON i.pk = s.item_pk WHERE i.benchmark_id = :b AND s.metric = :metric AND m.name IN :names")
    stmt = text(sql).bindparams(bindparam("names", expanding=True))
    in_prior = set(entry.item_pks)
    values: dict[str, list[float]] = {}
    for name, item_pk, value in session.execute(stmt, {"b": benchmark.id, "metric": benchmark.default_metric,
                                                       "names": names}):
        if int(item_pk) in in_prior:
            values.setdefault(name, []).append(float(value))
    for name, scores in values.items():
        if len(scores) == len(in_prior):
            found[name] = float(np.mean(scores))
    return found


def stop_half_width(row: EvalSession) -> float | None:
    """The interval half-width at or below which the session may stop: ``stop.half_width`` for the
    precision rule, else half of BayesAME's ``epsilon2`` (its rule also needs the estimate to move
    less than ``epsilon1`` over the window; papers/004 App. C.1)."""
    config = row.config or {}
    stop = config.get("stop") or {}
    if stop.get("half_width"):
        return float(stop["half_width"])
    epsilon2 = config.get("epsilon2")
    return float(epsilon2) / 2 if epsilon2 else None
