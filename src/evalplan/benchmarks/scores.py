"""Score upload (wide CSV or long JSON, all-or-nothing upsert) and download."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy.orm import Session

from evalplan.benchmarks.items import ensure_items
from evalplan.benchmarks.repository import score_cells_page
from evalplan.benchmarks.score_formats import ScoreUpload, parse_long_json, parse_wide_csv, write_wide_csv
from evalplan.benchmarks.score_matrix import ScoreMatrix, load_matrix, write_scores
from evalplan.benchmarks.service import scale_of
from evalplan.db.models import Benchmark
from evalplan.kit.errors import InvalidInput, UnsupportedMediaType
from evalplan.kit.pagination import Page
from evalplan.models.service import ensure_models

METRIC_RE = re.compile(r"^[A-Za-z0-9_.,:@/+\-]{1,200}$")


def check_metric(metric: str) -> str:
    if not METRIC_RE.match(metric):
        raise InvalidInput(
            f"invalid metric name {metric!r}",
            [{"parameter": "metric", "detail": "1-200 characters among letters, digits and _ . , : @ / + -"}],
        )
    return metric


def parse_score_body(body: bytes, content_type: str, benchmark: Benchmark,
                     max_items: int | None = None) -> ScoreUpload:
    media = content_type.split(";")[0].strip().lower()
    scale = scale_of(benchmark)
    if media in ("text/csv", "application/csv"):
        return parse_wide_csv(body, scale, max_items)
    if media == "application/json":
        return parse_long_json(body, scale, max_items)
    raise UnsupportedMediaType(
        "scores must be sent as text/csv (wide matrix) or application/json ([{model, item, score}]), "
        f"got {media or 'no content type'!r}",
        [{"header": "Content-Type", "detail": media or "missing"}],
    )


def store_upload(session: Session, benchmark: Benchmark, upload: ScoreUpload, metric: str) -> dict[str, Any]:
    """Create unknown models and items, upsert every cell, bump the benchmark's data version."""
    check_metric(metric)
    new_models: set[str] = set()
    new_items: set[int] = set()
    model_of = ensure_models(session, upload.model_names, new_models)
    pk_of = ensure_items(session, benchmark, upload.item_ids, new_items)
    n = write_scores(
        session,
        benchmark,
        [model_of[name] for name in upload.model_names],
        [pk_of[i] for i in upload.item_ids],
        upload.values,
        metric,
        fresh_models=new_models,
        fresh_item_pks=new_items,
    )
    benchmark.data_version = (benchmark.data_version or 0) + 1
    session.flush()
    return {"n_scores": n, "n_models": len(upload.model_names), "n_items": len(upload.item_ids), "metric": metric}


def upload_scores(session: Session, benchmark: Benchmark, body: bytes, content_type: str,
                  metric: str | None, max_items: int | None = None) -> dict[str, Any]:
    metric = check_metric(metric or benchmark.default_metric)
    upload = parse_score_body(body, content_type, benchmark, max_items)
    refuse_empty(upload, content_type)
    return store_upload(session, benchmark, upload, metric)


def refuse_empty(upload: ScoreUpload, content_type: str) -> None:
    """422 for an upload without a single score (a CSV header without model rows, rows of empty cells, ``[]``):
    nothing is stored, no model or item is created and the data version stays (issue 34, failure 4)."""
    if upload.n_scores:
        return
    if content_type.split(";")[0].strip().lower() == "application/json":
        where = {"row": 0, "detail": "no {model, item, score} rows"}
    elif upload.model_names:
        where = {"row": 2, "detail": f"{len(upload.model_names)} model row(s), every cell empty"}
    else:
        where = {"row": 2, "detail": "the header is not followed by any model row"}
    raise InvalidInput("the upload holds no scores; nothing was stored", [where])


def download_csv(session: Session, benchmark: Benchmark, metric: str | None) -> str:
    matrix = load_matrix(session, benchmark, check_metric(metric or benchmark.default_metric))
    return write_wide_csv(matrix.model_names, matrix.item_ids, matrix.values)


def matrix_for(session: Session, benchmark: Benchmark, metric: str | None) -> ScoreMatrix:
    return load_matrix(session, benchmark, check_metric(metric or benchmark.default_metric))


def list_score_cells(session: Session, benchmark: Benchmark, metric: str | None, *, limit: int,
                     cursor: str | None) -> Page[Any]:
    """Long-format score rows (``name`` = model, ``item_id``, ``value``), keyset-paginated by (model id, item row)."""
    metric = check_metric(metric or benchmark.default_metric)
    return score_cells_page(session, benchmark.id, metric, limit=limit, cursor=cursor)
