"""Bulk score I/O between the long ``scores`` table and numpy matrices.

PostgreSQL uses COPY (into a temporary table, then one upsert); SQLite uses a
batched ``INSERT .. ON CONFLICT``. Both run inside the caller's transaction, so an
upload is all-or-nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from sqlalchemy import func, insert, select, text
from sqlalchemy.orm import Session

from app.db.models import Benchmark, BenchmarkModel, Item, Model
from app.kit.db import analyze_after_commit
from app.kit.settings import get_settings

#: cells turned into Python objects at once while writing (a chunk of rows of the matrix)
CELL_CHUNK = 50_000
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
    observed_rows = [bool(np.any(~np.isnan(row))) for row in values]
    register_models(session, benchmark, [m for m, seen in zip(model_ids, observed_rows) if seen])
    chunks = _cell_chunks(model_ids, item_pks, values)
    if session.get_bind().dialect.name == "postgresql":
        n = _copy_upsert_postgres(session, metric, chunks)
    else:
        n = 0
        statement = text(UPSERT_SQL.format(source="VALUES (:m, :i, :k, :v)"))
        for models, items, cells in chunks:
            session.execute(statement, [{"m": m, "i": i, "k": metric, "v": v}
                                        for m, i, v in zip(models, items, cells)])
            n += len(cells)
    analyze_after_commit(session, n, "scores", "items", "benchmark_models")
    return n


def _cell_chunks(model_ids: list[str], item_pks: list[int], values: np.ndarray,
                 ) -> Iterator[tuple[list[str], list[int], list[float]]]:
    """The non-NaN cells as (model ids, item pks, values) lists of about ``CELL_CHUNK`` cells, a block of
    rows at a time: the Python objects of one chunk only are alive at once (a cell as three Python
    objects costs ~80 bytes against the 8 of the matrix)."""
    n_cols = max(1, values.shape[1])
    step = max(1, CELL_CHUNK // n_cols)
    pks = np.asarray(item_pks, dtype=np.int64)
    for start in range(0, values.shape[0], step):
        block = values[start:start + step]
        rows_idx, cols_idx = np.nonzero(~np.isnan(block))
        if rows_idx.size:
            yield ([model_ids[start + i] for i in rows_idx.tolist()], pks[cols_idx].tolist(),
                   block[rows_idx, cols_idx].tolist())


def _copy_upsert_postgres(session: Session, metric: str,
                          chunks: Iterator[tuple[list[str], list[int], list[float]]]) -> int:
    cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
    # The bulk write gets its own, longer statement timeout for the rest of this transaction (SET LOCAL).
    cursor.execute(f"SET LOCAL statement_timeout = {int(get_settings().db_bulk_statement_timeout_s * 1000)}")
    cursor.execute(
        "CREATE TEMP TABLE IF NOT EXISTS _score_upload "
        "(model_id varchar(40), item_pk bigint, metric varchar(200), value float8) ON COMMIT DELETE ROWS"
    )
    cursor.execute("TRUNCATE _score_upload")
    n = 0
    with cursor.copy("COPY _score_upload (model_id, item_pk, metric, value) FROM STDIN") as copy:
        # metric is validated to contain no tab/newline/backslash by the caller
        for models, items, cells in chunks:
            copy.write("".join([f"{m}\t{i}\t{metric}\t{v!r}\n" for m, i, v in zip(models, items, cells)]))
            n += len(cells)
    if n:
        cursor.execute(UPSERT_SQL.format(source="SELECT model_id, item_pk, metric, value FROM _score_upload"))
    cursor.execute("TRUNCATE _score_upload")
    return n


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
