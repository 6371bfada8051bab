"""The one import pipeline (issue 36 item 1): every harness's parser (lm-eval, inspect_ai, HELM, lighteval) emits
a :class:`~evalplan.integrations.harness_records.ParsedImport`, checked by :func:`check_parsed` and stored by
:func:`store` all-or-nothing, inline or as a job.

lm-eval differs only around it: one ``ParsedImport`` per file (task), all stored in one transaction, its answer
the per-task ``ImportSummary`` (:func:`store_lm_eval`), its jobs of kind ``lm_eval_import``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import asdict
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
from evalplan.integrations import lm_eval
from evalplan.integrations.harness_records import ParsedImport
from evalplan.integrations.helm import parse_helm
from evalplan.integrations.inspect_logs import parse_inspect_logs
from evalplan.integrations.lighteval import parse_lighteval_details
from evalplan.kit.errors import ErrorCollector, InvalidInput
from evalplan.kit.jobs import create_job
from evalplan.kit.schemas import MODEL_NAME_PATTERN
from evalplan.kit.upload_bounds import check_upload
from evalplan.models.service import ensure_models

KIND = "harness_import"
LM_EVAL_KIND = "lm_eval_import"
"""The kind of an lm-eval import's job (``GET /v1/jobs/{id}`` shows it): the same pipeline, lm-eval's payload."""

Parser = Callable[[list[tuple[str, bytes]], dict[str, Any]], ParsedImport]


def parsers() -> dict[str, Parser]:
    """harness -> ``(files, options) -> ParsedImport`` (a parser imports its harness extra when called)."""
    return {
        "inspect": lambda files, o: parse_inspect_logs(files, model=o.get("model"), benchmark=o.get("benchmark"),
                                                       scorer=o.get("scorer")),
        "helm": lambda files, o: parse_helm(files, model=o.get("model"), benchmark=o.get("benchmark"),
                                            stat=o.get("stat"), perturbed=bool(o.get("perturbed"))),
        "lighteval": lambda files, o: parse_lighteval_details(files, model=o.get("model"),
                                                              benchmark=o.get("benchmark"), metric=o.get("metric"),
                                                              split=o.get("split")),
    }


def check_archives(files: list[tuple[str, bytes]], max_bytes: int) -> None:
    """The upload bounds of ``evalplan.kit.upload_bounds`` (one place for every import path): 413 when an
    archive (found by opening, whatever its leading bytes) decompresses to more than ``max_bytes`` or the
    upload's JSON holds more than ``upload_bounds.MAX_JSON_VALUES`` values; 422/501 for an unreadable archive."""
    check_upload(files, max_bytes)


def parse(harness: str, files: list[tuple[str, bytes]], options: dict[str, Any],
          max_decompressed_bytes: int | None = None) -> ParsedImport:
    if max_decompressed_bytes is not None:
        check_archives(files, max_decompressed_bytes)
    return check_parsed(parsers()[harness](files, options))


def check_parsed(parsed: ParsedImport) -> ParsedImport:
    """422 for an invalid metric or model name, or for an import without a single score."""
    check_metric(parsed.metric)
    for name in parsed.scores:
        if not re.fullmatch(MODEL_NAME_PATTERN, name):
            raise InvalidInput(f"model name {name!r} from the log is not a valid model name; set the `model` field",
                               [{"field": "model", "detail": f"must match {MODEL_NAME_PATTERN}"}])
    if not parsed.scores:
        raise InvalidInput("nothing to import: no scored samples", [
            {"field": "files", "detail": f"{s.count} {s.what}(s) skipped: {s.why}"} for s in parsed.skipped
        ] or [{"field": "files", "detail": "no scores"}])
    return parsed


def parse_lm_eval(files: Iterable[tuple[str, Iterable[bytes | str]]], options: dict[str, Any]) -> list[ParsedImport]:
    """Every lm-eval samples file (``options``: ``model``, ``metric``, ``filter``) parsed and checked before
    anything is stored, each file checked before the next is read."""
    return [check_parsed(parsed) for parsed in lm_eval.parse_logs(files, model=options["model"],
                                                                    metric=options.get("metric"),
                                                                    filter=options.get("filter"))]


def _benchmark_for(session: Session, parsed: ParsedImport) -> tuple[Benchmark, bool]:
    """The caller's own benchmark of that name, locked, else a new one (``get_or_create_benchmark``: the names
    check, and safe when two imports create it at once): another team's public one is never written to (own
    first, as everywhere; its name stays free for the caller's own)."""
    values = [v for row in parsed.scores.values() for v in row.values()]
    if all(v in (0.0, 1.0) for v in values):
        kind, lo, hi = "binary", 0.0, 1.0
    elif all(0.0 <= v <= 1.0 for v in values):
        kind, lo, hi = "continuous", 0.0, 1.0
    else:
        kind, lo, hi = "continuous", None, None
    return get_or_create_benchmark(session, name=parsed.benchmark,
                                   description=parsed.description or f"Imported from {parsed.harness} logs",
                                   score_kind=kind, score_min=lo, score_max=hi, default_metric=parsed.metric)


def store(session: Session, parsed: ParsedImport, *, allow_foreign_items: bool = False) -> dict[str, Any]:
    """Create the benchmark, items and models as needed and upsert the scores and the models' responses, in the
    caller's transaction (``evalplan.imports.common``: another task's items are refused unless
    ``allow_foreign_items``)."""
    benchmark, created = _benchmark_for(session, parsed)
    check_related_items(session, benchmark, parsed.item_ids(), created=created,
                        allow_foreign_items=allow_foreign_items)
    scale = scale_of(benchmark)
    errors = ErrorCollector()
    for model, row in parsed.scores.items():
        for item, value in row.items():
            reason = scale.problem(value)
            if reason:
                errors.add(reason, **parsed.location(model, item))
    source = f" of {parsed.source}" if parsed.source else ""
    errors.raise_if_any(f"scores{source} do not fit benchmark {benchmark.name!r}")
    item_ids = parsed.item_ids()
    records = [ItemRecord(i, parsed.items[i].prompt, parsed.items[i].target, parsed.items[i].fields,
                          source_index=parsed.items[i].source_index)
               for i in item_ids if i in parsed.items]
    counts = upsert_items(session, benchmark, records) if records else {"created": 0, "updated": 0}
    pk_of = ensure_items(session, benchmark, item_ids)
    models = list(parsed.scores)
    model_ids = ensure_models(session, models)
    metric_note = adopt_metric(session, benchmark, parsed.metric)
    before = cells_of(session, benchmark, list(model_ids.values()), parsed.metric)
    values = np.full((len(models), len(item_ids)), np.nan)
    column = {item: j for j, item in enumerate(item_ids)}
    for r, model in enumerate(models):
        for item, value in parsed.scores[model].items():
            values[r, column[item]] = value
    n_scores = write_scores(session, benchmark, [model_ids[m] for m in models], [pk_of[i] for i in item_ids],
                            values, parsed.metric)
    replaced = n_scores - (cells_of(session, benchmark, list(model_ids.values()), parsed.metric) - before)
    n_responses = sum(replace_responses(session, benchmark, model_ids[m], pk_of, list(parsed.scores[m]),
                                        parsed.responses.get(m, {}), parsed.harness) for m in models)
    benchmark.data_version = (benchmark.data_version or 0) + 1
    session.flush()
    return {
        "harness": parsed.harness, "n_scores": n_scores, "n_items": len(item_ids), "n_models": len(models),
        "benchmark": benchmark.name, "benchmark_id": benchmark.id, "benchmark_created": created,
        "model": models[0] if len(models) == 1 else None, "models": models, "metric": parsed.metric,
        "items_created": counts["created"], "items_updated": counts["updated"], "scores_replaced": replaced,
        "default_metric": benchmark.default_metric,
        "mean_score": float(np.nanmean(values)), "averaged_over": parsed.repeats, "n_responses": n_responses,
        "skipped": [asdict(s) for s in parsed.skipped], "notes": parsed.notes + ([metric_note] if metric_note else []),
    }


def store_lm_eval(session: Session, model: str, parsed: list[ParsedImport], *,
                  allow_foreign_items: bool = False) -> dict[str, Any]:
    """:func:`store` each task of an lm-eval import in the caller's transaction; the answer per task and in
    total (``evalplan.imports.schemas.ImportSummary``)."""
    model_id = ensure_models(session, [model])[model]
    tasks = []
    for one in parsed:
        stored = store(session, one, allow_foreign_items=allow_foreign_items)
        tasks.append({
            "task": one.benchmark, "benchmark": stored["benchmark"], "benchmark_id": stored["benchmark_id"],
            "benchmark_created": stored["benchmark_created"], "metric": one.metric, "filter": one.filter,
            "n_items": stored["n_items"], "items_created": stored["items_created"],
            "items_updated": stored["items_updated"], "n_scores": stored["n_scores"],
            "scores_replaced": stored["scores_replaced"], "default_metric": stored["default_metric"],
            "mean_score": stored["mean_score"], "n_responses": stored["n_responses"], "notes": stored["notes"],
        })
    return {"model": model, "model_id": model_id, "benchmarks": tasks,
            "n_scores": sum(t["n_scores"] for t in tasks), "n_responses": sum(t["n_responses"] for t in tasks),
            "items_created": sum(t["items_created"] for t in tasks),
            "scores_replaced": sum(t["scores_replaced"] for t in tasks)}


def start_job(session: Session, harness: str, options: dict[str, Any], inputs: list[tuple[str, bytes]]) -> Job:
    """Queue a large import (the files are stored with the job); dispatch after commit. lm-eval's job is of kind
    ``lm_eval_import`` with its options as the payload (``model``, ``metric``, ``filter``,
    ``allow_foreign_items``), the others' ``harness_import`` with ``{harness, options}``."""
    if harness == "lm-eval":
        return create_job(session, LM_EVAL_KIND, options, inputs=inputs)
    return create_job(session, KIND, {"harness": harness, "options": options}, inputs=inputs)
