"""What sessions look like from outside: the API.md session, its trajectory, its observations, the
true score when known, and listing."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import bindparam, select, text
from sqlalchemy.orm import Session

from evalplan.auth.teams import team_name
from evalplan.benchmarks import repository as benchmark_repository
from evalplan.benchmarks.score_matrix import aligned, read_rows
from evalplan.benchmarks.service import get_benchmark
from evalplan.core.sequential.stopping import DEFAULT_LEVEL
from evalplan.db.models import EvalSession, SessionObservation
from evalplan.kit.errors import InvalidInput
from evalplan.kit.pagination import Page, keyset_page
from evalplan.kit.validation import finite_or_none
from evalplan.sessions.priors import load_prior
from evalplan.sessions.state import estimator_of
from evalplan.sessions.validation import PAPER_RULE_FIELDS

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
        benchmark = benchmark_repository.benchmark_by_id(session, row.benchmark_id)
        benchmark_name = benchmark.name if benchmark is not None else row.benchmark_id
    view = {
        "id": row.id, "benchmark": benchmark_name, "target": row.target, "status": row.status,
        "stop_reason": row.stop_reason, "next_items": list(row.next_items or []), "n_observed": row.n_observed,
        "estimate": row.estimate, "variance": row.variance, "ci": [row.ci_lo, row.ci_hi],
        "level": float((row.config or {}).get("level") or DEFAULT_LEVEL),
        "previous": [p["model"] for p in (row.config or {}).get("previous") or []] or None,
        "method": row.method, "config": public_config(row.config), "hyperparameters": row.hyperparameters,
        "reference_models": row.reference_models,
        "created_at": row.created_at, "updated_at": row.updated_at,
        "team": team or team_name(session, row.team_id), "visibility": row.visibility,
    }
    design = (row.hyperparameters or {}).get("design") if not row.targets else None
    if isinstance(design, dict):  # a design-based method (active_design): which interval, both estimates
        view.update(interval_kind=design.get("interval_kind"), design=design)
    compare = (row.config or {}).get("compare")
    if compare and not row.targets:  # a paired session: the comparator, the difference and the decision
        view["compare"] = {**compare, **((row.hyperparameters or {}).get("compare") or {})}
    if row.targets:
        state = row.target_state or {}
        view["ci"] = None
        view.update(targets=list(row.targets), n_latent=row.n_latent, next=list(state.get("next", [])),
                    per_target=dict(state.get("per_target", {})))
    return view


def public_config(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """The stored configuration as the session shows it: BayesAME's stopping parameters (``epsilon1``,
    ``epsilon2``, ``window``, papers/004 App. C.1) only when that rule applies, i.e. without ``stop``."""
    if not config or config.get("stop") is None:
        return config
    return {k: v for k, v in config.items() if k not in PAPER_RULE_FIELDS}


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
             "ci": [finite_or_none(r["ci"][0]), finite_or_none(r["ci"][1])],
             **({"probability": finite_or_none(r["probability"])} if "probability" in r else {}),
             **({"difference": finite_or_none(r["difference"]),
                 "difference_ci": [finite_or_none(v) for v in r["difference_ci"]],
                 "decision": r["decision"]} if "difference" in r else {})} for r in rows]


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
    return benchmark_repository.names_by_id(session, set(benchmark_ids))


def list_observations(session: Session, row: EvalSession, *, limit: int, cursor: str | None) -> Page[dict[str, Any]]:
    """The posted observations, newest first: ``{n, item, score, target, created_at}`` with ``n`` the
    1-based arrival order over the session (all targets)."""
    stmt = select(SessionObservation).where(SessionObservation.session_id == row.id)
    page = keyset_page(session, stmt, SessionObservation.seq, limit=limit, cursor=cursor, what="observation",
                       descending=True)
    names: list[str] = list(row.targets or [row.target or ""])
    design = row.method == "active_design"  # its draws record a probability; an item it did not propose has none
    return Page([{"n": o.seq + 1, "item": o.item_id, "score": o.score, "target": names[o.target_index],
                  "created_at": o.created_at, "probability": o.probability,
                  **({"off_design": o.probability is None} if design else {})} for o in page.items],
                page.next_cursor)


def find_observations(session: Session, row: EvalSession, item: str) -> Page[dict[str, Any]]:
    """The observations of item id ``item`` (every target's), as :func:`list_observations` rows."""
    found = session.scalars(select(SessionObservation).where(SessionObservation.session_id == row.id,
                                                             SessionObservation.item_id == item)
                            .order_by(SessionObservation.seq.desc()))
    names: list[str] = list(row.targets or [row.target or ""])
    return Page([{"n": o.seq + 1, "item": o.item_id, "score": o.score, "target": names[o.target_index],
                  "created_at": o.created_at} for o in found], None)


def true_scores(session: Session, row: EvalSession) -> dict[str, float | None]:
    """Per target: its full-benchmark score (the mean of its stored scores over the session's items,
    the estimand), known only when the target has a stored score for every one of those items."""
    benchmark = benchmark_repository.benchmark_by_id(session, row.benchmark_id)
    entry = load_prior(session, row.prior_key)
    names: list[str] = list(row.targets or [row.target or ""])
    found: dict[str, float | None] = dict.fromkeys(names)
    if benchmark is None or not entry.item_pks:
        return found
    sql = ("SELECT m.name, r.model_id FROM score_rows r JOIN models m ON m.id = r.model_id "
           "WHERE r.benchmark_id = :b AND r.metric = :metric AND m.name IN :names")
    stmt = text(sql).bindparams(bindparam("names", expanding=True))
    params = {"b": benchmark.id, "metric": benchmark.default_metric, "names": names}
    id_of: dict[str, str] = dict(session.execute(stmt, params).all())
    if not id_of:
        return found
    position_of = benchmark_repository.positions_by_pk(session, entry.item_pks)
    if len(position_of) != len(entry.item_pks):
        return found
    positions = np.fromiter((position_of[pk] for pk in entry.item_pks), np.int64, len(entry.item_pks))
    rows = read_rows(session, benchmark.id, benchmark.default_metric, list(id_of.values()))
    for name, model_id in id_of.items():
        if model_id in rows:
            scores = aligned(rows[model_id][0], positions)
            if not np.isnan(scores).any():
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
