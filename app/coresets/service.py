"""Static coresets (``POST /v1/coresets``): validate, select in a job, read, export, predict.

Text methods (papers/000) run on cached item-text embeddings; the job computes the
missing embeddings first. Selection itself is ``app.core.selection``. Score-based methods
(papers/002) are ``app.coresets.families.score_based`` (cpu queue); RepCore is ``app.coresets.families.hidden_state``.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.budget import fraction_counts
from app.core.selection import TEXT_METHODS
from app.db.models import Benchmark, Coreset, CoresetItem, Item, Job
from app.kit.errors import Conflict, ErrorCollector, InvalidInput, NotFound
from app.coresets.repository import mark_coreset_failed
from app.kit.jobs import JobContext, create_job, register
from app.benchmarks.service import get_benchmark
from app.kit.pagination import Page, keyset_page

KIND = "coreset"
STRATIFIED_BY_DEFAULT = {"facility_location": True, "stratified_random": True}
SCORE_METHODS = ("anchor_points", "hardness", "irt", "lasso", "mrmr", "pbsc", "random_search")  # score_coresets
HIDDEN_STATE_METHODS = ("repcore",)  # app.coresets.families.hidden_state (papers/003)


@dataclass
class CoresetRequest:
    method: str
    benchmarks: list[str]
    budget: int | dict[str, float]
    name: str | None = None
    reference_models: list[str] | str | None = None
    predictor: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    embedding_model: str | None = None


def method_class(method: str) -> type:
    if method in TEXT_METHODS:
        return TEXT_METHODS[method]
    valid = sorted([*TEXT_METHODS, *SCORE_METHODS, *HIDDEN_STATE_METHODS])
    raise InvalidInput(f"unknown method {method!r}; valid methods: {', '.join(valid)}",
                       [{"field": "method", "detail": f"one of {valid}"}])


def check_params(method: str, params: dict[str, Any], seed: int) -> dict[str, Any]:
    if method == "repcore":
        from app.coresets.families import hidden_state as repcore

        return repcore.check_params(params)
    if method in SCORE_METHODS:
        from app.coresets.families import score_based as score_coresets

        return score_coresets.check_params(method, params, seed)
    cls = method_class(method)
    allowed = dict(getattr(cls, "PARAMS", {}))
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise InvalidInput(
            f"unknown parameter(s) {unknown} for method {method!r}; valid parameters: {sorted(allowed) or 'none'}",
            [{"field": f"params.{p}", "detail": f"valid: {sorted(allowed)}"} for p in unknown])
    try:
        cls(k=1, seed=seed, **params).validate_params()
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"invalid parameters for {method!r}: {exc}", [{"field": "params", "detail": str(exc)}]) from None
    return params


@dataclass
class BudgetPlan:
    total: int
    per_benchmark: list[int] | None  # set for fraction budgets: each benchmark selected on its own


def plan_budget(budget: int | dict[str, float], sizes: list[int], names: list[str], stratified: bool) -> BudgetPlan:
    n_total = sum(sizes)
    if isinstance(budget, dict):
        fraction = budget.get("fraction")
        if set(budget) != {"fraction"} or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise InvalidInput("budget must be an integer or {\"fraction\": f} with 0 < f <= 1",
                               [{"field": "budget", "detail": f"got {budget!r}"}])
        counts = fraction_counts(sizes, float(fraction))
        return BudgetPlan(sum(counts), counts)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise InvalidInput("budget must be a positive integer or {\"fraction\": f}",
                           [{"field": "budget", "detail": f"got {budget!r}"}])
    if budget > n_total:
        raise InvalidInput(f"budget {budget} is larger than the {n_total} selectable items of {', '.join(names)}",
                           [{"field": "budget", "detail": f"at most {n_total}"}])
    if stratified and budget < len(sizes):
        raise InvalidInput(
            f"budget {budget} is smaller than the number of benchmarks ({len(sizes)}) under stratification; "
            "raise the budget or set params.stratify to false",
            [{"field": "budget", "detail": f"at least {len(sizes)}"}])
    return BudgetPlan(budget, None)


def _resolve_benchmarks(session: Session, refs: list[str]) -> list[Benchmark]:
    if not refs:
        raise InvalidInput("benchmarks must name at least one benchmark", [{"field": "benchmarks", "detail": "empty"}])
    benchmarks = [get_benchmark(session, ref) for ref in refs]
    ids = [b.id for b in benchmarks]
    if len(set(ids)) != len(ids):
        raise InvalidInput("a benchmark is named twice", [{"field": "benchmarks", "detail": "duplicates"}])
    return benchmarks


def text_item_counts(session: Session, benchmark_ids: list[str]) -> dict[str, tuple[int, int]]:
    """(items, items with text) per benchmark."""
    rows = session.execute(
        select(Item.benchmark_id, func.count(), func.count(Item.prompt))
        .where(Item.benchmark_id.in_(benchmark_ids)).group_by(Item.benchmark_id)
    ).all()
    found = {b: (int(n), int(t)) for b, n, t in rows}
    return {b: found.get(b, (0, 0)) for b in benchmark_ids}


def create_coreset(session: Session, request: CoresetRequest, default_embedding_model: str) -> tuple[Coreset, Job]:
    """Validate everything, store a pending coreset and its job (dispatch after commit)."""
    params = check_params(request.method, dict(request.params or {}), request.seed)
    benchmarks = _resolve_benchmarks(session, request.benchmarks)
    if request.method == "repcore":
        from app.coresets.families import hidden_state as repcore

        k, sources = repcore.validate_request(session, benchmarks, request.budget, request.reference_models)
        reference = request.reference_models if request.reference_models == "all" else [m.name for m in sources]
        return _store(session, request, benchmarks, params, reference, None,
                      {"method": "repcore", "k": k, "sources": [m.id for m in sources]})
    if request.method in SCORE_METHODS:
        from app.coresets.families import score_based as score_coresets

        effective, names, payload = score_coresets.create(session, request, benchmarks, params)
        return _store(session, effective, benchmarks, params, request.reference_models if request.reference_models
                      == "all" else names, None, payload, kind=score_coresets.KIND)
    counts = text_item_counts(session, [b.id for b in benchmarks])
    errors = ErrorCollector()
    for b in benchmarks:
        n, n_text = counts[b.id]
        if n == 0:
            errors.add(f"benchmark {b.name!r} has no items", field="benchmarks", benchmark=b.name)
        elif n_text == 0:
            errors.add(f"benchmark {b.name!r} has no item text; text method {request.method!r} needs prompts "
                       "(upload items with POST /v1/benchmarks/{benchmark}/items)", field="benchmarks", benchmark=b.name)
    errors.raise_if_any("benchmarks cannot be used")
    sizes = [counts[b.id][1] for b in benchmarks]
    stratified = bool(params.get("stratify", STRATIFIED_BY_DEFAULT.get(request.method, False)))
    plan = plan_budget(request.budget, sizes, [b.name for b in benchmarks], stratified)
    reference = _check_reference_models(session, request.reference_models)
    return _store(session, request, benchmarks, params, reference,
                  request.embedding_model or default_embedding_model,
                  {"per_benchmark": plan.per_benchmark, "k": plan.total})


def _store(session: Session, request: CoresetRequest, benchmarks: list[Benchmark], params: dict[str, Any],
           reference: list[str] | str | None, embedding_model: str | None,
           payload: dict[str, Any], kind: str = KIND) -> tuple[Coreset, Job]:
    version = 1
    if request.name:
        latest = session.scalar(select(func.max(Coreset.version)).where(Coreset.name == request.name))
        version = (latest or 0) + 1
    coreset = Coreset(
        name=request.name, version=version, method=request.method, status="pending",
        benchmark_ids=[b.id for b in benchmarks], budget=request.budget, params=params, seed=request.seed,
        reference_models=reference, predictor=request.predictor, embedding_model=embedding_model,
    )
    session.add(coreset)
    session.flush()
    job = create_job(session, kind, {"coreset_id": coreset.id, **payload})
    coreset.job_id = job.id
    session.flush()
    return coreset, job


def _check_reference_models(session: Session, refs: list[str] | str | None) -> list[str] | str | None:
    if refs is None or refs == "all":
        return refs
    if isinstance(refs, str) or not all(isinstance(r, str) for r in refs):
        raise InvalidInput('reference_models must be a list of model names or "all"',
                           [{"field": "reference_models", "detail": f"got {refs!r}"}])
    from app.models.service import get_model

    return [get_model(session, r).name for r in refs]


# --------------------------------------------------------------------------- the job


@register(KIND, queue="gpu")
def run_coreset(ctx: JobContext) -> dict[str, Any]:
    """Text methods: embed what is missing, (tune alpha,) select. RepCore: train (or reuse) the alignment,
    select anchors. Both persist the ranked items."""
    from app.coresets.families.text import select_text_coreset

    coreset_id = ctx.payload["coreset_id"]
    try:
        if ctx.payload.get("method") == "repcore":
            from app.coresets.families.hidden_state import select_repcore_coreset

            result = select_repcore_coreset(ctx, coreset_id, ctx.payload["k"], ctx.payload["sources"])
        else:
            result = select_text_coreset(ctx, coreset_id, ctx.payload["k"], ctx.payload.get("per_benchmark"))
    except Exception as exc:
        mark_coreset_failed(ctx, coreset_id, exc)
        raise
    return result


# --------------------------------------------------------------------------- reading


def get_coreset(session: Session, coreset_id: str) -> Coreset:
    coreset = session.get(Coreset, coreset_id)
    if coreset is None:
        raise NotFound(f"coreset {coreset_id!r} does not exist", [{"parameter": "id", "detail": "no such coreset"}])
    return coreset


def coreset_rows(session: Session, coreset: Coreset) -> list[dict[str, Any]]:
    rows = session.execute(
        select(CoresetItem.rank, CoresetItem.gain, CoresetItem.weight, Item.item_id, Item.source_index,
               Benchmark.name)
        .join(Item, Item.pk == CoresetItem.item_pk)
        .join(Benchmark, Benchmark.id == CoresetItem.benchmark_id)
        .where(CoresetItem.coreset_id == coreset.id).order_by(CoresetItem.rank)
    ).all()
    return [{"benchmark": b, "item": i, "rank": r, "gain": _finite(g), "weight": _finite(w), "source_index": s}
            for r, g, w, i, s, b in rows]


def _finite(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def benchmark_names(session: Session, ids: list[str]) -> list[str]:
    names = dict(session.execute(select(Benchmark.id, Benchmark.name).where(Benchmark.id.in_(ids))).all())
    return [names.get(i, i) for i in ids]


def coreset_view(session: Session, coreset: Coreset) -> dict[str, Any]:
    job = session.get(Job, coreset.job_id) if coreset.job_id else None
    items = [{k: v for k, v in row.items() if k != "source_index"} for row in coreset_rows(session, coreset)]
    return {
        "id": coreset.id, "name": coreset.name, "version": coreset.version, "method": coreset.method,
        "status": coreset.status, "params": coreset.params, "benchmarks": benchmark_names(session, coreset.benchmark_ids),
        "budget": coreset.budget, "seed": coreset.seed, "reference_models": coreset.reference_models,
        "predictor": coreset.predictor, "embedding_model": coreset.embedding_model, "n_items": len(items),
        "items": items, "diagnostics": coreset.diagnostics, "error": coreset.error,
        "job": {"id": job.id, "status": job.status, "progress": job.progress} if job else None,
        "created_at": coreset.created_at.isoformat() if coreset.created_at else None,
    }


def list_coresets(session: Session, *, limit: int, cursor: str | None, name: str | None = None) -> Page[Coreset]:
    stmt = select(Coreset)
    if name is not None:
        stmt = stmt.where(Coreset.name == name)
    return keyset_page(session, stmt, Coreset.id, limit=limit, cursor=cursor, what="coreset", descending=True)


def require_ready(coreset: Coreset) -> None:
    if coreset.status != "ready":
        raise Conflict(f"coreset {coreset.id} is {coreset.status}, not ready",
                       [{"field": "status", "detail": coreset.status}])


EXPORT_FORMATS = ("jsonl", "csv", "lm-eval", "inspect")


def export_coreset(session: Session, coreset: Coreset, fmt: str) -> tuple[str, str]:
    """Render the coreset; returns (body, media type)."""
    require_ready(coreset)
    rows = coreset_rows(session, coreset)
    if fmt == "jsonl":
        lines = [json.dumps({k: v for k, v in r.items() if k != "source_index"}) for r in rows]
        return "\n".join(lines) + ("\n" if lines else ""), "application/x-ndjson"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["benchmark", "item", "rank", "gain", "weight"])
        for r in rows:
            writer.writerow([r["benchmark"], r["item"], r["rank"], "" if r["gain"] is None else repr(r["gain"]),
                             "" if r["weight"] is None else repr(r["weight"])])
        return out.getvalue(), "text/csv; charset=utf-8"
    if fmt == "lm-eval":
        by_task: dict[str, set[int]] = {}
        errors = ErrorCollector()
        for r in rows:
            index = r["source_index"]
            if index is None and r["item"].isdigit():
                index = int(r["item"])
            if index is None:
                errors.add(f"item {r['item']!r} of {r['benchmark']!r} has no lm-eval doc index "
                           "(import the benchmark with POST /v1/imports/lm-eval)", benchmark=r["benchmark"], item=r["item"])
                continue
            by_task.setdefault(r["benchmark"], set()).add(int(index))
        errors.raise_if_any("coreset cannot be exported for lm-eval")
        return json.dumps({task: sorted(ix) for task, ix in by_task.items()}), "application/json"
    if fmt == "inspect":
        by_task_ids: dict[str, list[str]] = {}
        for r in rows:
            by_task_ids.setdefault(r["benchmark"], []).append(r["item"])
        return json.dumps(by_task_ids), "application/json"
    raise InvalidInput(f"unknown export format {fmt!r}; valid formats: {', '.join(EXPORT_FORMATS)}",
                       [{"parameter": "format", "detail": f"one of {list(EXPORT_FORMATS)}"}])
