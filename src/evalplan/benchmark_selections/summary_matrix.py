"""The input of a benchmark-level selection: a models x benchmarks summary matrix, uploaded
(``matrix``, null = missing, every cell checked) or computed from stored item scores (``benchmarks``:
each model's mean item score per benchmark, NaN where it has none)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from evalplan.benchmark_selections.schemas import BenchmarkSelectionCreate, MatrixIn
from evalplan.benchmarks.score_matrix import load_matrix
from evalplan.benchmarks.scores import check_metric
from evalplan.benchmarks.service import get_benchmarks
from evalplan.db.models import Model
from evalplan.kit.errors import ErrorCollector, InvalidInput
from evalplan.models.service import get_model


@dataclass
class SummaryMatrix:
    models: list[str]
    benchmarks: list[str]
    values: np.ndarray  # models x benchmarks, NaN = missing
    source: str
    metric: str | None


def number_or_nan(value: Any) -> float | None:
    """A finite float, NaN for null, or None when the cell is not a finite number."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def _check_names(names: list[str], field: str, errors: ErrorCollector) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if not name or not name.strip():
            errors.add("empty name", field=f"{field}.{i}")
        elif name in seen:
            errors.add(f"{name!r} is named twice", field=f"{field}.{i}")
        seen.add(name)


def matrix_from_upload(matrix: MatrixIn) -> SummaryMatrix:
    errors = ErrorCollector()
    _check_names(matrix.models, "matrix.models", errors)
    _check_names(matrix.benchmarks, "matrix.benchmarks", errors)
    n, b = len(matrix.models), len(matrix.benchmarks)
    if len(matrix.values) != n:
        errors.add(f"values has {len(matrix.values)} rows for {n} models", field="matrix.values")
    values = np.full((len(matrix.values), b), np.nan)
    for i, row in enumerate(matrix.values):
        if len(row) != b:
            errors.add(f"row has {len(row)} values for {b} benchmarks", field=f"matrix.values.{i}")
            continue
        for j, cell in enumerate(row):
            x = number_or_nan(cell)
            if x is None:
                errors.add(f"not a finite number or null: {cell!r}", field=f"matrix.values.{i}.{j}")
            else:
                values[i, j] = x
    errors.raise_if_any("invalid matrix")
    return SummaryMatrix(list(matrix.models), list(matrix.benchmarks), values, "matrix", None)


def matrix_from_scores(session: Session, refs: list[str], metric: str | None,
                       model_refs: list[str] | None) -> SummaryMatrix:
    """Each model's mean item score per benchmark (NaN where it has none)."""
    if metric is not None:
        check_metric(metric)
    benchmarks = get_benchmarks(session, refs)
    wanted: list[Model] | None = None
    if model_refs is not None:
        wanted = [get_model(session, ref) for ref in model_refs]
        if len({m.id for m in wanted}) != len(wanted):
            raise InvalidInput("a model is named twice", [{"field": "models", "detail": "duplicates"}])
    means: dict[str, dict[int, float]] = {}  # model id -> {column: mean}
    names: dict[str, str] = {}
    for j, bm in enumerate(benchmarks):
        sm = load_matrix(session, bm, metric or bm.default_metric)
        for i, (mid, name) in enumerate(zip(sm.model_ids, sm.model_names)):
            row = sm.values[i]
            observed = row[~np.isnan(row)]
            if observed.size:
                means.setdefault(mid, {})[j] = float(observed.mean())
                names[mid] = name
    order = [m.id for m in wanted if m.id in means] if wanted is not None else list(means)
    values = np.full((len(order), len(benchmarks)), np.nan)
    for i, mid in enumerate(order):
        for j, v in means[mid].items():
            values[i, j] = v
    metric_label = metric if metric is not None else (
        benchmarks[0].default_metric if len({bm.default_metric for bm in benchmarks}) == 1 else None)
    return SummaryMatrix([names[m] for m in order], [bm.name for bm in benchmarks], values, "benchmarks", metric_label)


def summary_matrix(session: Session, body: BenchmarkSelectionCreate) -> SummaryMatrix:
    if (body.matrix is None) == (body.benchmarks is None):
        raise InvalidInput("give exactly one of `matrix` and `benchmarks`",
                           [{"field": "matrix", "detail": "exactly one of matrix, benchmarks"},
                            {"field": "benchmarks", "detail": "exactly one of matrix, benchmarks"}])
    if body.matrix is not None:
        extra = [f for f in ("metric", "models") if getattr(body, f) is not None]
        if extra:
            raise InvalidInput(f"{' and '.join(extra)}: only allowed with `benchmarks` input, not `matrix`",
                               [{"field": f, "detail": "only with benchmarks"} for f in extra])
        return matrix_from_upload(body.matrix)
    return matrix_from_scores(session, body.benchmarks or [], body.metric, body.models)
