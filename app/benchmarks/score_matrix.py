"""Bulk score I/O between the long ``scores`` table and numpy matrices.

PostgreSQL uses a binary COPY (into a temporary table, then one set-based upsert);
SQLite uses a batched ``INSERT .. ON CONFLICT``. Both run inside the caller's transaction, so an
upload is all-or-nothing.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Iterator
from dataclasses import dataclass

import numpy as np
import psycopg
from sqlalchemy import func, insert, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app.db.models import Benchmark, BenchmarkModel, Item, Model
from app.kit.db import analyze_after_commit
from app.kit.observability import SCORE_CELLS
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
    *,
    fresh_models: Collection[str] = (),
    fresh_item_pks: Collection[int] = (),
) -> int:
    """Upsert every non-NaN cell of ``values`` (rows = model_ids, columns = item_pks).

    A model row without any value stores nothing, so it does not join the benchmark. ``fresh_models`` and
    ``fresh_item_pks``: the models and items this transaction created (their cells cannot exist yet; on
    PostgreSQL they are copied without the upsert).
    """
    observed_rows = [bool(np.any(~np.isnan(row))) for row in values]
    register_models(session, benchmark, [m for m, seen in zip(model_ids, observed_rows) if seen])
    if session.get_bind().dialect.name == "postgresql":
        n = copy_upsert_postgres(session, metric, model_ids, item_pks, values, fresh_models=fresh_models,
                                 fresh_item_pks=fresh_item_pks)
        SCORE_CELLS.labels("copy").inc(n)
    else:
        n = 0
        statement = text(UPSERT_SQL.format(source="VALUES (:m, :i, :k, :v)"))
        for models, items, cells in _cell_chunks(model_ids, item_pks, values):
            session.execute(statement, [{"m": m, "i": i, "k": metric, "v": v}
                                        for m, i, v in zip(models, items, cells)])
            n += len(cells)
        SCORE_CELLS.labels("batched").inc(n)
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


# PostgreSQL: binary COPY, item-major, in rounds of COPY_ROUND cells.
#: the binary COPY signature, flags and header extension length (PostgreSQL docs, "COPY", binary format)
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
COPY_TRAILER = struct.pack(">h", -1)
#: cells per round: one COPY (and, for cells that may exist already, one upsert) statement each, so no single
#: statement of a 200 MB upload runs long, and the buffer of one round is ~16 MB (~65 bytes a cell)
COPY_ROUND = 250_000
STAGING_TABLE = "_score_cells"
MERGE_SQL = UPSERT_SQL.format(source=f"SELECT model_id, item_pk, %(metric)s, value FROM {STAGING_TABLE}")


def item_major_rounds(values: np.ndarray, cells: int = COPY_ROUND,
                      ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The non-NaN cells of ``values`` as ``(rows, cols, values)`` arrays of about ``cells`` cells, item-major:
    every model's cell of one item, then of the next item.

    In that order the write inserts at the right edge of ``ix_scores_item_pk`` and at one tail page per model
    of the primary key: a working set that stays in shared buffers. The matrix's own model-major order touches
    every item's leaf page of ``ix_scores_item_pk`` once per model, which thrashes the buffer cache once the
    index outgrows it (a few million cells).
    """
    n_models, n_items = values.shape
    step = max(1, cells // max(1, n_models))
    for start in range(0, n_items, step):
        block = np.ascontiguousarray(values[:, start:start + step].T)  # items x models
        cols, rows = np.nonzero(~np.isnan(block))
        if cols.size:
            yield rows, cols + start, block[cols, rows]


def binary_copy_rows(model_ids: np.ndarray, rows: np.ndarray, pks: np.ndarray, cell_values: np.ndarray,
                     metric: bytes | None) -> bytes:
    """Cells as rows of PostgreSQL's binary COPY format: ``(model_id, item_pk[, metric], value)``, encoded by
    numpy (no Python object per cell). ``model_ids`` are bytes (numpy ``S``), indexed by ``rows``; cells are
    grouped by the byte length of their model id (one group when all ids have one length, as ``new_id``'s do)."""
    lengths = np.char.str_len(model_ids)[rows]
    distinct = np.unique(lengths)
    parts = []
    for length in distinct.tolist():
        pick: slice | np.ndarray = slice(None) if distinct.size == 1 else lengths == length
        fields: list[tuple[str, str]] = [("n_fields", ">i2"), ("id_len", ">i4"), ("model_id", f"S{length}"),
                                         ("pk_len", ">i4"), ("item_pk", ">i8")]
        if metric is not None:
            fields += [("metric_len", ">i4"), ("metric", f"S{len(metric)}")]
        fields += [("value_len", ">i4"), ("value", ">f8")]
        group_rows = rows[pick]
        out = np.empty(group_rows.size, dtype=np.dtype(fields))
        out["n_fields"], out["id_len"], out["pk_len"], out["value_len"] = 3 if metric is None else 4, length, 8, 8
        out["model_id"] = model_ids[group_rows]
        out["item_pk"] = pks[pick]
        if metric is not None:
            out["metric_len"], out["metric"] = len(metric), metric
        out["value"] = cell_values[pick]
        parts.append(out.tobytes())
    return b"".join(parts)


def copy_upsert_postgres(session: Session, metric: str, model_ids: list[str], item_pks: list[int],
                         values: np.ndarray, *, fresh_models: Collection[str] = (),
                         fresh_item_pks: Collection[int] = ()) -> int:
    """Write every non-NaN cell with binary ``COPY``, in the caller's transaction (all-or-nothing).

    A cell of a model or an item this transaction created (``fresh_models``, ``fresh_item_pks``) cannot exist
    yet, nor can a concurrent transaction write it (the row is not visible to any other): it is copied straight
    into ``scores``. Every other cell is copied into a temporary staging table and merged with one set-based
    ``INSERT .. SELECT .. ON CONFLICT DO UPDATE`` per round. Rounds of ``COPY_ROUND`` cells, item-major.

    The driver's errors come back as SQLAlchemy's (``DBAPIError``), as for every other statement, so a
    cancelled or timed-out bulk write answers like one (503), not as an unknown error (500).
    """
    cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
    ids = np.array([m.encode() for m in model_ids] or [b"-"])
    pks = np.asarray(item_pks, dtype=np.int64)
    fresh_rows = np.array([m in fresh_models for m in model_ids] or [False])
    fresh_cols = np.isin(pks, np.fromiter(fresh_item_pks, dtype=np.int64, count=len(fresh_item_pks)))
    metric_bytes = metric.encode()
    n = 0
    staging = False
    try:
        # The bulk write gets its own, longer statement timeout for the rest of this transaction (SET LOCAL).
        cursor.execute(f"SET LOCAL statement_timeout = {int(get_settings().db_bulk_statement_timeout_s * 1000)}")
        for rows, cols, cells in item_major_rounds(values):
            fresh = fresh_rows[rows] | fresh_cols[cols]
            if fresh.any():
                with cursor.copy("COPY scores (model_id, item_pk, metric, value) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.write(COPY_HEADER)
                    copy.write(binary_copy_rows(ids, rows[fresh], pks[cols[fresh]], cells[fresh], metric_bytes))
                    copy.write(COPY_TRAILER)
            if not fresh.all():
                if not staging:
                    cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {STAGING_TABLE} (model_id text NOT NULL, "
                                   "item_pk int8 NOT NULL, value float8 NOT NULL) ON COMMIT DELETE ROWS")
                    staging = True
                cursor.execute(f"TRUNCATE {STAGING_TABLE}")
                old = ~fresh
                with cursor.copy(f"COPY {STAGING_TABLE} (model_id, item_pk, value) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.write(COPY_HEADER)
                    copy.write(binary_copy_rows(ids, rows[old], pks[cols[old]], cells[old], None))
                    copy.write(COPY_TRAILER)
                cursor.execute(MERGE_SQL, {"metric": metric})
            n += int(rows.size)
        if staging:
            cursor.execute(f"TRUNCATE {STAGING_TABLE}")
    except psycopg.Error as exc:
        raise DBAPIError.instance("COPY + upsert into scores", None, exc, psycopg.Error) from exc
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
