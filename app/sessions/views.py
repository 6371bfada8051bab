"""What sessions look like from outside: the API.md session, its trajectory, and listing."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.benchmarks.service import get_benchmark
from app.db.models import Benchmark, EvalSession
from app.kit.errors import InvalidInput
from app.kit.pagination import Page, keyset_page
from app.kit.validation import finite_or_none
from app.sessions.state import estimator_of

STATUSES = ("active", "stopped")


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
        "created_at": row.created_at, "updated_at": row.updated_at,
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
