"""Store a parsed harness import (inspect_ai, HELM, lighteval) all-or-nothing, inline or as a job."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.benchmarks.items import ItemRecord, ensure_items, upsert_items
from app.benchmarks.score_matrix import write_scores
from app.benchmarks.scores import check_metric
from app.benchmarks.service import create_benchmark, scale_of
from app.db.models import Benchmark, Job
from app.integrations.harness_records import ParsedImport
from app.kit.errors import ErrorCollector, InvalidInput
from app.kit.jobs import create_job
from app.kit.schemas import MODEL_NAME_PATTERN
from app.models.service import ensure_models

KIND = "harness_import"

Parser = Callable[[list[tuple[str, bytes]], dict[str, Any]], ParsedImport]


def parsers() -> dict[str, Parser]:
    """harness -> ``(files, options) -> ParsedImport``; imported lazily (each harness package is an extra)."""
    from app.integrations.helm import parse_helm
    from app.integrations.inspect_logs import parse_inspect_logs
    from app.integrations.lighteval import parse_lighteval_details

    return {
        "inspect": lambda files, o: parse_inspect_logs(files, model=o.get("model"), benchmark=o.get("benchmark"),
                                                       scorer=o.get("scorer")),
        "helm": lambda files, o: parse_helm(files, model=o.get("model"), benchmark=o.get("benchmark"),
                                            stat=o.get("stat"), perturbed=bool(o.get("perturbed"))),
        "lighteval": lambda files, o: parse_lighteval_details(files, model=o.get("model"),
                                                              benchmark=o.get("benchmark"), metric=o.get("metric"),
                                                              split=o.get("split")),
    }


def parse(harness: str, files: list[tuple[str, bytes]], options: dict[str, Any]) -> ParsedImport:
    parsed = parsers()[harness](files, options)
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


def _benchmark_for(session: Session, parsed: ParsedImport) -> tuple[Benchmark, bool]:
    benchmark = session.scalars(select(Benchmark).where(Benchmark.name == parsed.benchmark).with_for_update()).first()
    if benchmark is not None:
        return benchmark, False
    values = [v for row in parsed.scores.values() for v in row.values()]
    if all(v in (0.0, 1.0) for v in values):
        kind, lo, hi = "binary", 0.0, 1.0
    elif all(0.0 <= v <= 1.0 for v in values):
        kind, lo, hi = "continuous", 0.0, 1.0
    else:
        kind, lo, hi = "continuous", None, None
    benchmark = create_benchmark(session, name=parsed.benchmark, description=f"Imported from {parsed.harness} logs",
                                 score_kind=kind, score_min=lo, score_max=hi, default_metric=parsed.metric)
    return benchmark, True


def store(session: Session, parsed: ParsedImport) -> dict[str, Any]:
    """Create the benchmark, items and models as needed and upsert the scores, in the caller's transaction."""
    benchmark, created = _benchmark_for(session, parsed)
    scale = scale_of(benchmark)
    errors = ErrorCollector()
    for model, row in parsed.scores.items():
        for item, value in row.items():
            reason = scale.problem(value)
            if reason:
                errors.add(reason, model=model, item=item, metric=parsed.metric)
    errors.raise_if_any(f"scores do not fit benchmark {benchmark.name!r}")
    item_ids = parsed.item_ids()
    records = [ItemRecord(i, parsed.items[i].prompt, parsed.items[i].target, parsed.items[i].fields)
               for i in item_ids if i in parsed.items]
    counts = upsert_items(session, benchmark, records) if records else {"created": 0, "updated": 0}
    pk_of = ensure_items(session, benchmark, item_ids)
    models = list(parsed.scores)
    model_ids = ensure_models(session, models)
    values = np.full((len(models), len(item_ids)), np.nan)
    column = {item: j for j, item in enumerate(item_ids)}
    for r, model in enumerate(models):
        for item, value in parsed.scores[model].items():
            values[r, column[item]] = value
    n_scores = write_scores(session, benchmark, [model_ids[m] for m in models], [pk_of[i] for i in item_ids],
                            values, parsed.metric)
    benchmark.data_version = (benchmark.data_version or 0) + 1
    session.flush()
    return {
        "harness": parsed.harness, "n_scores": n_scores, "n_items": len(item_ids), "n_models": len(models),
        "benchmark": benchmark.name, "benchmark_id": benchmark.id, "benchmark_created": created,
        "model": models[0] if len(models) == 1 else None, "models": models, "metric": parsed.metric,
        "items_created": counts["created"], "items_updated": counts["updated"],
        "mean_score": float(np.nanmean(values)), "averaged_over": parsed.repeats,
        "skipped": [asdict(s) for s in parsed.skipped], "notes": parsed.notes,
    }


def start_job(session: Session, harness: str, options: dict[str, Any], inputs: list[tuple[str, bytes]]) -> Job:
    """Queue a large import (the files are stored with the job); dispatch after commit."""
    return create_job(session, KIND, {"harness": harness, "options": options}, inputs=inputs)
