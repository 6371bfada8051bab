"""A plan's chart and its savings: the budget curve per method with the chosen point (issue 25 §4,
issue 26 §4). Shared by ``GET /v1/plans/{id}/plot.svg`` (and ``/v1/jobs/{id}/plot.svg``) and the plan page."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy.orm import Session

from evalplan import charts
from evalplan.core.backtest.session_planner import REGIME_LABELS
from evalplan.db.models import Job
from evalplan.kit.errors import Conflict, NotFound
from evalplan.kit.repository import job_by_id
from evalplan.plans.service import KIND


def is_plan(job: Job) -> bool:
    return job.kind == KIND


def get_plan(session: Session, plan_id: str) -> Job:
    """The plan job ``plan_id`` (a job id; 404 when there is none or it is another kind of job)."""
    job = job_by_id(session, plan_id)
    if job is None:
        raise NotFound(f"plan {plan_id!r} does not exist", [{"parameter": "plan_id", "detail": "no such plan"}])
    return plan_job(job)


def plan_job(job: Job) -> Job:
    """404 unless ``job`` is a plan job."""
    if not is_plan(job):
        raise NotFound(f"job {job.id} is a {job.kind} job, not a plan",
                       [{"parameter": "plan_id", "detail": f"kind {job.kind}"}])
    return job


def plan_chart(job: Job) -> Any:
    """409 unless the plan job succeeded."""
    if job.status != "succeeded":
        raise Conflict(f"plan {job.id} is {job.status}; its chart exists once it succeeds",
                       [{"field": "status", "detail": job.status}])
    return charts.plan_curves((job.result or {}).get("benchmarks") or {})


def savings(job: Job) -> dict[str, Any]:
    """:func:`savings_of` a finished plan job (its request's ``cost_per_item``)."""
    return savings_of(job.result or {}, (job.payload or {}).get("cost_per_item"))


def savings_of(result: dict[str, Any], cost: float | None) -> dict[str, Any]:
    """What the plan ``result`` saves against running every item: per benchmark and in all, items and
    (given ``cost`` per item, in the caller's unit: GPU-seconds, dollars) compute."""
    rows = []
    for name, plan in (result.get("benchmarks") or {}).items():
        n, k = int(plan.get("n_items") or 0), int(plan.get("budget") or 0)
        rows.append({"benchmark": name, "method": plan.get("label"), "items": k, "all_items": n,
                     "saved_items": n - k, "saved_fraction": (n - k) / n if n else math.nan,
                     "half_width": plan.get("half_width"), "expected_rmse": plan.get("expected_rmse"),
                     "reached": plan.get("method") != "full", "stopped": plan.get("stopped")})
    total_n = sum(r["all_items"] for r in rows)
    total_k = sum(r["items"] for r in rows)
    out: dict[str, Any] = {"rows": rows, "items": total_k, "all_items": total_n, "saved_items": total_n - total_k,
                           "saved_fraction": (total_n - total_k) / total_n if total_n else math.nan,
                           "cost_per_item": cost}
    if cost is not None:
        out.update({"cost": total_k * float(cost), "all_cost": total_n * float(cost),
                    "saved_cost": (total_n - total_k) * float(cost)})
    return out


def session_rows(job: Job) -> list[dict[str, Any]]:
    """One row per (benchmark, regime) of a finished plan's ``session`` blocks (the plan page's session table);
    empty for a plan without them (``session_targets: 0``, or a plan made before they existed)."""
    rows = []
    for name, plan in ((job.result or {}).get("benchmarks") or {}).items():
        block = plan.get("session")
        if not block:
            continue
        for key, label in REGIME_LABELS.items():
            regime = (block.get("regimes") or {}).get(key) or {}
            rows.append({"benchmark": name, "method": block.get("method"), "regime": label,
                         "skipped": regime.get("skipped"), "targets": regime.get("targets"),
                         "items": regime.get("items"), "items_upper": regime.get("items_upper"),
                         "n_items": block.get("n_items"),
                         "random_items": (regime.get("random") or {}).get("items"),
                         "vs_random": regime.get("vs_random"), "coverage": regime.get("coverage_at_stop")})
    return rows
