"""Bulk score I/O between the long ``scores`` table and numpy matrices.

PostgreSQL uses COPY (into a temporary table, then one upsert); SQLite uses a
batched ``INSERT .. ON CONFLICT``. Both run inside the caller's transaction, so an
upload is all-or-nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import func, insert, select, text
from sqlalchemy.orm import Session

from app.db.models import Benchmark, BenchmarkModel, Item, Model
from app.kit.db import analyze_after_commit

UPSERT_SQL = (
    "INSERT INTO scores (model_id, item_pk, metric, value) {source} "
    "ON CONFLICT (model_id, item_pk, metric) DO UPDATE SET value = excluded.value"
)


@dataclass
class ScoreMatrix:
    """Scores of one benchmark and metric: ``values[i, j]`` for model i and item j (NaN = missing)."""

    model_ids: list[str]
    model_names: list[str]
    item_ids: list[str]
    item_pks: list[int]
    values: np.ndarray


def register_models(session: Session, benchmark: Benchmark, model_ids: list[str]) -> None:
    """Give models new to this benchmark the next row positions, in the given order."""
    known = set(session.scalars(select(BenchmarkModel.model_id).where(BenchmarkModel.benchmark_id == benchmark.id)))
    new = [m for m in dict.fromkeys(model_ids) if m not in known]
    if not new:
        return
    last = session.scalar(
        select(func.max(BenchmarkModel.position)).where(BenchmarkModel.benchmark_id == benchmark.id)
    )
    start = -1 if last is None else int(last)
    session.execute(insert(BenchmarkModel), [
        {"benchmark_id": benchmark.id, "model_id": m, "position": start + 1 + k} for k, m in enumerate(new)
    ])


def write_scores(
    session: Session,
    benchmark: Benchmark,
    model_ids: list[str],
    item_pks: list[int],
    values: np.ndarray,
    metric: str,
) -> int:
    """Upsert every non-NaN cell of ``values`` (rows = model_ids, columns = item_pks).

    A model row without any value stores nothing, so it does not join the benchmark.
    """
    observed = ~np.isnan(values)
    register_models(session, benchmark, [m for m, row in zip(model_ids, observed) if row.any()])
    rows_idx, cols_idx = np.nonzero(observed)
    if rows_idx.size == 0:
        return 0
    cell_values = values[rows_idx, cols_idx].tolist()
    model_col = [model_ids[i] for i in rows_idx.tolist()]
    item_col = [item_pks[j] for j in cols_idx.tolist()]
    if session.get_bind().dialect.name == "postgresql":
        _copy_upsert_postgres(session, model_col, item_col, metric, cell_values)
    else:
        params = [
            {"m": m, "i": i, "k": metric, "v": v} for m, i, v in zip(model_col, item_col, cell_values)
        ]
        session.execute(text(UPSERT_SQL.format(source="VALUES (:m, :i, :k, :v)")), params)
    analyze_after_commit(session, len(cell_values), "scores", "items", "benchmark_models")
    return len(cell_values)


def _copy_upsert_postgres(session: Session, models: list[str], items: list[int], metric: str,
                          values: list[float]) -> None:
    cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
    cursor.execute(
        "CREATE TEMP TABLE IF NOT EXISTS _score_upload "
        "(model_id varchar(40), item_pk bigint, metric varchar(200), value float8) ON COMMIT DELETE ROWS"
    )
    cursor.execute("TRUNCATE _score_upload")
    with cursor.copy("COPY _score_upload (model_id, item_pk, metric, value) FROM STDIN") as copy:
        lines = [f"{m}\t{i}\t{metric}\t{v!r}\n" for m, i, v in zip(models, items, values)]
        # metric is validated to contain no tab/newline/backslash by the caller
        for start in range(0, len(lines), 50_000):
            copy.write("".join(lines[start:start + 50_000]))
    cursor.execute(UPSERT_SQL.format(source="SELECT model_id, item_pk, metric, value FROM _score_upload"))
    cursor.execute("TRUNCATE _score_upload")


def load_matrix(session: Session, benchmark: Benchmark, metric: str) -> ScoreMatrix:
    """Load a benchmark's scores for ``metric`` as a dense matrix.

    Columns are every item of the benchmark in upload order; rows are the models
    with at least one score for ``metric``, in the order they were first uploaded.
    """
    item_rows = session.execute(
        select(Item.pk, Item.item_id).where(Item.benchmark_id == benchmark.id).order_by(Item.pk)
    ).all()
    item_pks = [r[0] for r in item_rows]
    item_ids = [r[1] for r in item_rows]
    col_of = {pk: j for j, pk in enumerate(item_pks)}
    sql = (
        "SELECT s.model_id, s.item_pk, s.value FROM scores s JOIN items i ON i.pk = s.item_pk "
        "WHERE i.benchmark_id = :b AND s.metric = :m"
    )
    triples = session.execute(text(sql), {"b": benchmark.id, "m": metric}).all()
    scored = {t[0] for t in triples}
    members = session.execute(
        select(BenchmarkModel.model_id, Model.name)
        .join(Model, Model.id == BenchmarkModel.model_id)
        .where(BenchmarkModel.benchmark_id == benchmark.id)
        .order_by(BenchmarkModel.position)
    ).all()
    model_ids = [m for m, _ in members if m in scored]
    names = dict(members)
    row_of = {m: i for i, m in enumerate(model_ids)}
    values = np.full((len(model_ids), len(item_pks)), np.nan)
    if triples:
        r = np.fromiter((row_of[t[0]] for t in triples), dtype=np.int64, count=len(triples))
        c = np.fromiter((col_of[t[1]] for t in triples), dtype=np.int64, count=len(triples))
        v = np.fromiter((t[2] for t in triples), dtype=np.float64, count=len(triples))
        values[r, c] = v
    return ScoreMatrix(model_ids, [names[m] for m in model_ids], item_ids, item_pks, values)
