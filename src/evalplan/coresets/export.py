"""``GET /v1/coresets/{id}/export``: a ready coreset as JSONL, CSV, lm-eval doc indices or inspect sample ids."""

from __future__ import annotations

import csv
import io
import json

from sqlalchemy.orm import Session

from evalplan.coresets.repository import coreset_rows
from evalplan.coresets.service import require_ready
from evalplan.db.models import Coreset
from evalplan.kit.csv_cells import neutralise
from evalplan.kit.errors import ErrorCollector, InvalidInput

EXPORT_FORMATS = ("jsonl", "csv", "lm-eval", "inspect")


LM_EVAL_NEEDS_INDICES = (
    "lm-eval picks examples by their position in the task's dataset (`lm_eval --samples` takes doc indices), "
    "and these items have none: their ids are not numbers and they were not imported from lm-eval. To get "
    "this file, upload the benchmark's scores from lm-eval's sample logs (POST /v1/imports/lm-eval or "
    "`evalplan run lm-eval`: each doc_id becomes the item) and build the coreset on that benchmark; "
    "otherwise use the inspect, JSONL or CSV export, which name the items by their ids")


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
            writer.writerow([neutralise(r["benchmark"]), neutralise(r["item"]), r["rank"],
                             "" if r["gain"] is None else repr(r["gain"]),
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
                           "(import the benchmark with POST /v1/imports/lm-eval)",
                           benchmark=r["benchmark"], item=r["item"])
                continue
            by_task.setdefault(r["benchmark"], set()).add(int(index))
        if errors:
            raise InvalidInput(LM_EVAL_NEEDS_INDICES + f" ({len(errors.errors)} item(s) without one, e.g. "
                               f"{errors.errors[0]['item']!r} of {errors.errors[0]['benchmark']!r})", errors.errors)
        return json.dumps({task: sorted(ix) for task, ix in by_task.items()}), "application/json"
    if fmt == "inspect":
        by_task_ids: dict[str, list[str]] = {}
        for r in rows:
            by_task_ids.setdefault(r["benchmark"], []).append(r["item"])
        return json.dumps(by_task_ids), "application/json"
    raise InvalidInput(f"unknown export format {fmt!r}; valid formats: {', '.join(EXPORT_FORMATS)}",
                       [{"parameter": "format", "detail": f"one of {list(EXPORT_FORMATS)}"}])
