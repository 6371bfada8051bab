"""Import evaluation logs from lm-evaluation-harness (``lm_eval --log_samples``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from evalplan.benchmarks.items import ItemRecord, ensure_items, upsert_items
from evalplan.benchmarks.responses import replace_responses
from evalplan.benchmarks.score_matrix import write_scores
from evalplan.benchmarks.scores import check_metric
from evalplan.benchmarks.service import get_or_create_benchmark, scale_of
from evalplan.db.models import Benchmark, Job
from evalplan.imports.common import adopt_metric, cells_of, check_related_items
from evalplan.integrations.lm_eval import LmEvalTaskLog, parse_samples
from evalplan.kit.errors import ErrorCollector, InvalidInput
from evalplan.kit.jobs import create_job
from evalplan.models.service import ensure_models

KIND = "lm_eval_import"


def parse_logs(files: Iterable[tuple[str, Iterable[bytes]]], metric: str | None,
               filter_name: str | None) -> list[LmEvalTaskLog]:
    """Parse and validate every file before anything is stored; one task per file."""
    logs: list[LmEvalTaskLog] = []
    seen: dict[str, str] = {}
    for filename, lines in files:
        log = parse_samples(filename, lines, metric=metric, filter=filter_name)
        if log.task in seen:
            raise InvalidInput(f"task {log.task!r} appears in two files",
                               [{"file": filename, "detail": f"also in {seen[log.task]}"}])
        seen[log.task] = filename
        check_metric(log.metric)
        logs.append(log)
    if not logs:
        raise InvalidInput("no files to import", [{"field": "files",
                                                   "detail": "at least one samples_<task>_<date>.jsonl"}])
    return logs


def _benchmark_for(session: Session, log: LmEvalTaskLog) -> tuple[Benchmark, bool]:
    scores = [item.score for item in log.items]
    if log.all_binary:
        kind, lo, hi = "binary", 0.0, 1.0
    elif all(0.0 <= s <= 1.0 for s in scores):
        kind, lo, hi = "continuous", 0.0, 1.0
    else:
        kind, lo, hi = "continuous", None, None
    return get_or_create_benchmark(
        session, name=log.task, description=f"Imported from lm-evaluation-harness log {log.filename}",
        score_kind=kind, score_min=lo, score_max=hi, default_metric=log.metric,
    )


def store_logs(session: Session, model_name: str, logs: list[LmEvalTaskLog],
               progress: Callable[[float], None] | None = None, *, allow_foreign_items: bool = False) -> dict[str, Any]:
    """Create benchmarks/items as needed and upsert the model's scores and responses, in the caller's transaction
    (``evalplan.imports.common``: another task's items are refused unless ``allow_foreign_items``)."""
    model_id = ensure_models(session, [model_name])[model_name]
    summaries = []
    for n, log in enumerate(logs, start=1):
        benchmark, created = _benchmark_for(session, log)
        check_related_items(session, benchmark, [str(item.doc_id) for item in log.items], created=created,
                            allow_foreign_items=allow_foreign_items)
        scale = scale_of(benchmark)
        errors = ErrorCollector()
        for item in log.items:
            reason = scale.problem(item.score)
            if reason:
                errors.add(reason, file=log.filename, doc_id=item.doc_id, column=log.metric)
        errors.raise_if_any(f"scores of {log.filename} do not fit benchmark {benchmark.name!r}")
        counts = upsert_items(session, benchmark, [
            ItemRecord(str(item.doc_id), item.prompt, item.target, item.fields, source_index=item.doc_id)
            for item in log.items
        ])
        pk_of = ensure_items(session, benchmark, [str(item.doc_id) for item in log.items])
        values = np.array([[item.score for item in log.items]], dtype=np.float64)
        metric_note = adopt_metric(session, benchmark, log.metric)
        before = cells_of(session, benchmark, [model_id], log.metric)
        n_scores = write_scores(session, benchmark, [model_id], [pk_of[str(item.doc_id)] for item in log.items],
                                values, log.metric)
        replaced = n_scores - (cells_of(session, benchmark, [model_id], log.metric) - before)
        n_responses = replace_responses(session, benchmark, model_id, pk_of, [str(item.doc_id) for item in log.items],
                                        {str(item.doc_id): item.response for item in log.items if item.response},
                                        "lm_eval")
        benchmark.data_version = (benchmark.data_version or 0) + 1
        session.flush()
        summaries.append({
            "task": log.task, "benchmark": benchmark.name, "benchmark_id": benchmark.id, "benchmark_created": created,
            "metric": log.metric, "filter": log.filter, "n_items": len(log.items),
            "items_created": counts["created"], "items_updated": counts["updated"], "n_scores": n_scores,
            "scores_replaced": replaced, "default_metric": benchmark.default_metric,
            "mean_score": float(values.mean()) if values.size else None, "n_responses": n_responses,
            "notes": [metric_note] if metric_note else [],
        })
        if progress is not None:
            progress(0.5 + 0.5 * n / len(logs))
    return {"model": model_name, "model_id": model_id, "benchmarks": summaries,
            "n_scores": sum(s["n_scores"] for s in summaries),
            "n_responses": sum(s["n_responses"] for s in summaries),
            "items_created": sum(s["items_created"] for s in summaries),
            "scores_replaced": sum(s["scores_replaced"] for s in summaries)}


def start_import_job(session: Session, model_name: str, metric: str | None, filter_name: str | None,
                     inputs: list[tuple[str, bytes]], *, allow_foreign_items: bool = False) -> Job:
    """Queue a large import (the files are stored with the job); dispatch after commit."""
    return create_job(session, KIND, {"model": model_name, "metric": metric, "filter": filter_name,
                                      "allow_foreign_items": allow_foreign_items}, inputs=inputs)
