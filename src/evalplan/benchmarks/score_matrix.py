"""Bulk score I/O between packed score rows (``score_rows``, one per benchmark, model and metric) and numpy.

A row holds a model's whole row of the matrix, aligned to the benchmark's dense item order (``items.position``),
so reading a model's scores is one row and a benchmark's matrix one query, and an upload writes one row per
model instead of one per cell. PostgreSQL: ``double precision[]`` written and read with binary COPY /
``array_send`` (numpy encodes and decodes, no Python object per cell); rows of models new to the benchmark are
copied straight in, rows that exist already are read, merged with the upload and replaced whole (staged by
COPY, one ``UPDATE .. FROM`` per round). SQLite: a JSON array per row, one ``INSERT .. ON CONFLICT`` per row.
Both run inside the caller's transaction, so an upload is all-or-nothing (docs/DECISIONS.md "Score storage").
"""

from __future__ import annotations

import json
import struct
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from sqlalchemy import func, insert, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from evalplan.db.models import Benchmark, BenchmarkModel, Item
from evalplan.kit.db import analyze_after_commit
from evalplan.kit.observability import SCORE_CELLS
from evalplan.kit.settings import get_settings

#: cells per write round: the rows of one round are read, merged, encoded and written together (~16 MB of
#: float64 and ~24 MB of COPY encoding), so the write holds a bounded slice of the matrix at once
ROUND_CELLS = 2_000_000


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


# ---------------------------------------------------------------------------------------------------------
# PostgreSQL binary formats (PostgreSQL docs, "COPY" binary format and array_send/array_recv)

#: the binary COPY signature, flags and header extension length
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
COPY_TRAILER = struct.pack(">h", -1)
FLOAT8_OID = 701
#: one array element on the wire: its byte length (always 8) and the big-endian float8
ELEMENT = np.dtype([("len", ">i4"), ("value", ">f8")])
STAGING_TABLE = "_score_rows_staging"


def encode_array(values: np.ndarray) -> bytes:
    """A float8[] in PostgreSQL's binary format (one dimension, lower bound 1, no NULLs: NaN = missing)."""
    n = int(values.size)
    if n == 0:
        return struct.pack(">iiI", 0, 0, FLOAT8_OID)
    elements = np.empty(n, dtype=ELEMENT)
    elements["len"] = 8
    elements["value"] = values
    return struct.pack(">iiIii", 1, 0, FLOAT8_OID, n, 1) + elements.tobytes()


def decode_array(data: bytes | memoryview) -> np.ndarray:
    """The float64 values of a float8[] in PostgreSQL's binary format (``array_send``); NULL is NaN."""
    ndim, has_null = struct.unpack_from(">ii", data, 0)
    if ndim == 0:
        return np.empty(0)
    n = struct.unpack_from(">i", data, 12)[0]
    if not has_null:
        return np.frombuffer(data, dtype=ELEMENT, count=n, offset=20)["value"].astype(np.float64)
    out = np.full(n, np.nan)
    offset = 20
    for k in range(n):  # a NULL element (not written by this module) has length -1 and no bytes
        (length,) = struct.unpack_from(">i", data, offset)
        offset += 4
        if length >= 0:
            out[k] = struct.unpack_from(">d", data, offset)[0]
            offset += length
    return out


def _field(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def copy_tuple(fields: Iterable[bytes]) -> bytes:
    """One tuple of a binary COPY from its already-encoded fields."""
    parts = list(fields)
    return struct.pack(">h", len(parts)) + b"".join(_field(p) for p in parts)


def _int4(value: int) -> bytes:
    return struct.pack(">i", value)


# ---------------------------------------------------------------------------------------------------------
# SQLite: JSON arrays (null = missing)

def _to_json(values: np.ndarray) -> str:
    return json.dumps([None if v != v else v for v in values.tolist()])


def _from_json(data: str) -> np.ndarray:
    return np.array(json.loads(data), dtype=np.float64).reshape(-1)


# ---------------------------------------------------------------------------------------------------------
# reads

def _pg_cursor(session: Session, binary: bool = False) -> Any:
    session.flush()
    return session.connection().connection.driver_connection.cursor(binary=binary)  # type: ignore[union-attr]


def read_rows(session: Session, benchmark_id: str, metric: str, model_ids: Collection[str] | None = None,
              ) -> dict[str, tuple[np.ndarray, int]]:
    """Stored rows of the benchmark under ``metric`` (of ``model_ids`` when given): model id -> (values by item
    position, version). A row may be shorter than the benchmark's item count (later items are missing)."""
    if model_ids is not None and not model_ids:
        return {}
    if session.get_bind().dialect.name == "postgresql":
        cursor = _pg_cursor(session, binary=True)
        sql = "SELECT model_id, version, array_send(vals) FROM score_rows WHERE benchmark_id = %s AND metric = %s"
        params: list[Any] = [benchmark_id, metric]
        if model_ids is not None and len(model_ids) == 1:
            sql += " AND model_id = %s"
            params.append(next(iter(model_ids)))
        elif model_ids is not None:
            sql += " AND model_id = ANY(%s)"
            params.append(list(model_ids))
        try:
            cursor.execute(sql, params)
            return {m: (decode_array(data), int(v)) for m, v, data in cursor.fetchall()}
        except psycopg.Error as exc:
            raise DBAPIError.instance(sql, None, exc, psycopg.Error) from exc
    stmt = "SELECT model_id, version, vals FROM score_rows WHERE benchmark_id = :b AND metric = :m"
    found = session.execute(text(stmt), {"b": benchmark_id, "m": metric}).all()
    wanted = None if model_ids is None else set(model_ids)
    return {m: (_from_json(data), int(v)) for m, v, data in found if wanted is None or m in wanted}


def item_order(session: Session, benchmark_id: str) -> tuple[list[int], list[str], np.ndarray]:
    """The benchmark's items in position order: (pks, item ids, positions)."""
    rows = session.execute(select(Item.pk, Item.item_id, Item.position).where(Item.benchmark_id == benchmark_id)
                           .order_by(Item.position)).all()
    return [r[0] for r in rows], [r[1] for r in rows], np.fromiter((r[2] for r in rows), np.int64, len(rows))


def aligned(row: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """A stored row's values at ``positions`` (NaN past its end)."""
    if positions.size and int(positions.max()) >= row.size:
        padded = np.full(int(positions.max()) + 1, np.nan)
        padded[:row.size] = row
        row = padded
    return row[positions]


def model_row(session: Session, benchmark: Benchmark, model_id: str, metric: str,
              positions: np.ndarray | None = None) -> np.ndarray | None:
    """One model's scores on the benchmark in item-position order (one primary-key read), or None when it has
    no row; ``positions``: the items wanted (default: 0 .. the row's length - 1)."""
    found = read_rows(session, benchmark.id, metric, [model_id]).get(model_id)
    if found is None:
        return None
    return found[0] if positions is None else aligned(found[0], positions)


def load_matrix(session: Session, benchmark: Benchmark, metric: str) -> ScoreMatrix:
    """Load a benchmark's scores for ``metric`` as a dense matrix.

    Columns are every item of the benchmark in upload order; rows are the models
    with at least one score for ``metric``, in the order they were first uploaded.
    """
    item_pks, item_ids, positions = item_order(session, benchmark.id)
    members = session.execute(
        text("SELECT bm.model_id, m.name FROM benchmark_models bm JOIN models m ON m.id = bm.model_id "
             "JOIN score_rows r ON r.benchmark_id = bm.benchmark_id AND r.model_id = bm.model_id "
             "WHERE bm.benchmark_id = :b AND r.metric = :m AND r.n_scores > 0 ORDER BY bm.position"),
        {"b": benchmark.id, "m": metric}).all()
    rows = read_rows(session, benchmark.id, metric) if members else {}
    model_ids = [m for m, _ in members]
    values = np.full((len(model_ids), len(item_pks)), np.nan)
    for i, m in enumerate(model_ids):
        values[i] = aligned(rows[m][0], positions)
    return ScoreMatrix(model_ids, [name for _, name in members], item_ids, item_pks, values)


def models_with_scores(session: Session, benchmark_id: str, metric: str) -> list[str]:
    """Ids of the models with at least one score on the benchmark under ``metric`` (the rows of ``load_matrix``)."""
    return list(session.scalars(text("SELECT model_id FROM score_rows WHERE benchmark_id = :b AND metric = :m "
                                     "AND n_scores > 0"), {"b": benchmark_id, "m": metric}))


def metrics_of(session: Session, benchmark_id: str, limit: int = 20) -> list[str]:
    """The metrics the benchmark has scores under (sorted, at most ``limit``)."""
    return list(session.scalars(text("SELECT DISTINCT metric FROM score_rows WHERE benchmark_id = :b "
                                     "AND n_scores > 0 ORDER BY metric LIMIT :n"), {"b": benchmark_id, "n": limit}))


# ---------------------------------------------------------------------------------------------------------
# writes

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
    """Store every non-NaN cell of ``values`` (rows = model_ids, columns = item_pks); cells not in the upload keep
    their stored values. Returns the number of cells written.

    A model row without any value stores nothing, so it does not join the benchmark. ``fresh_models``: the models
    this transaction created (they have no row yet: on PostgreSQL their rows are copied straight in, without
    reading). ``fresh_item_pks`` is accepted for the callers' sake (new items only widen rows).
    """
    observed_rows = [bool(np.any(~np.isnan(row))) for row in values]
    register_models(session, benchmark, [m for m, seen in zip(model_ids, observed_rows) if seen])
    position_of = dict(session.execute(select(Item.pk, Item.position).where(Item.benchmark_id == benchmark.id)).all())
    positions = np.fromiter((position_of[pk] for pk in item_pks), np.int64, len(item_pks))
    width = max(position_of.values(), default=-1) + 1
    postgres = session.get_bind().dialect.name == "postgresql"
    fresh = set(fresh_models)
    step = max(1, ROUND_CELLS // max(1, width))
    n = 0
    writer = PostgresRowWriter(session, benchmark.id, metric) if postgres else None
    try:
        for start in range(0, len(model_ids), step):
            picked = [i for i in range(start, min(start + step, len(model_ids))) if observed_rows[i]]
            if not picked:
                continue
            stored = read_rows(session, benchmark.id, metric, [model_ids[i] for i in picked
                                                               if model_ids[i] not in fresh])
            new_rows: list[tuple[str, np.ndarray]] = []
            old_rows: list[tuple[str, np.ndarray]] = []
            for i in picked:
                cells = values[i]
                have = ~np.isnan(cells)
                n += int(have.sum())
                found = stored.get(model_ids[i])
                row = np.full(width, np.nan)
                if found is not None:
                    row[:min(width, found[0].size)] = found[0][:width]
                row[positions[have]] = cells[have]
                (old_rows if found is not None else new_rows).append((model_ids[i], row))
            if writer is not None:
                writer.write(new_rows, old_rows)
            else:
                _write_sqlite(session, benchmark.id, metric, new_rows + old_rows)
    except psycopg.Error as exc:
        raise DBAPIError.instance("COPY into score_rows", None, exc, psycopg.Error) from exc
    SCORE_CELLS.labels("copy" if postgres else "batched").inc(n)
    analyze_after_commit(session, n, "score_rows", "items", "benchmark_models")
    return n


SQLITE_UPSERT = ("INSERT INTO score_rows (benchmark_id, model_id, metric, n_scores, version, vals) "
                 "VALUES (:b, :m, :k, :n, 1, :v) ON CONFLICT (benchmark_id, model_id, metric) DO UPDATE SET "
                 "vals = excluded.vals, n_scores = excluded.n_scores, version = score_rows.version + 1")


def _write_sqlite(session: Session, benchmark_id: str, metric: str, rows: list[tuple[str, np.ndarray]]) -> None:
    if rows:
        session.execute(text(SQLITE_UPSERT), [
            {"b": benchmark_id, "m": m, "k": metric, "n": int(np.count_nonzero(~np.isnan(row))), "v": _to_json(row)}
            for m, row in rows])


class PostgresRowWriter:
    """Rows of models without a stored row go straight into ``score_rows`` by binary COPY; replaced rows are
    copied into a temporary staging table and written by one ``UPDATE .. FROM`` per round (whole rows)."""

    def __init__(self, session: Session, benchmark_id: str, metric: str) -> None:
        self.cursor = _pg_cursor(session)
        self.benchmark_id = benchmark_id.encode()
        self.metric = metric.encode()
        self.params = {"b": benchmark_id, "m": metric}
        self.staging = False
        # The bulk write gets its own, longer statement timeout for the rest of this transaction (SET LOCAL).
        self.cursor.execute(f"SET LOCAL statement_timeout = {int(get_settings().db_bulk_statement_timeout_s * 1000)}")

    def write(self, new_rows: list[tuple[str, np.ndarray]], old_rows: list[tuple[str, np.ndarray]]) -> None:
        if new_rows:
            with self.cursor.copy("COPY score_rows (benchmark_id, model_id, metric, n_scores, version, vals) "
                                  "FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(COPY_HEADER)
                for model_id, row in new_rows:
                    copy.write(copy_tuple([self.benchmark_id, model_id.encode(), self.metric,
                                           _int4(int(np.count_nonzero(~np.isnan(row)))), _int4(1),
                                           encode_array(row)]))
                copy.write(COPY_TRAILER)
        if old_rows:
            if not self.staging:
                self.cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {STAGING_TABLE} (model_id text NOT NULL, "
                                    "n_scores int4 NOT NULL, vals float8[] NOT NULL) ON COMMIT DELETE ROWS")
                self.staging = True
            self.cursor.execute(f"TRUNCATE {STAGING_TABLE}")
            columns = "(model_id, n_scores, vals)"
            with self.cursor.copy(f"COPY {STAGING_TABLE} {columns} FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(COPY_HEADER)
                for model_id, row in old_rows:
                    copy.write(copy_tuple([model_id.encode(), _int4(int(np.count_nonzero(~np.isnan(row)))),
                                           encode_array(row)]))
                copy.write(COPY_TRAILER)
            self.cursor.execute(
                f"UPDATE score_rows r SET vals = s.vals, n_scores = s.n_scores, version = r.version + 1 "
                f"FROM {STAGING_TABLE} s WHERE r.benchmark_id = %(b)s AND r.metric = %(m)s AND r.model_id = s.model_id",
                self.params)
            self.cursor.execute(f"TRUNCATE {STAGING_TABLE}")
