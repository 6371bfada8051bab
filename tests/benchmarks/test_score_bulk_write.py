"""The bulk score write (issues 13 and 27, the 200 MB upload): packed score rows, on PostgreSQL written by binary
COPY (new rows straight in, replaced rows staged and updated whole), on SQLite one upsert per row; exact values
either way; all-or-nothing when the body is bad late in the file or the database cancels the write late.
"""

from __future__ import annotations

import struct
import threading

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session

from evalplan.benchmarks.score_matrix import (
    COPY_HEADER,
    COPY_TRAILER,
    copy_tuple,
    decode_array,
    encode_array,
)
from evalplan.db.models import Benchmark, BenchmarkModel, Item, Model, Score, ScoreRow
from evalplan.kit.observability import HTTP_REGISTRY
from evalplan.kit.settings import get_settings
from support.helpers import assert_problem, wide_csv

CSV = {"content-type": "text/csv"}


def cells_written(path: str) -> float:
    return HTTP_REGISTRY.get_sample_value("evalplan_score_cells_written_total", {"path": path}) or 0.0


def table_snapshot(engine: Engine) -> dict[str, object]:
    with engine.connect() as conn:
        return {
            "counts": {t.__tablename__: conn.execute(select(func.count()).select_from(t)).scalar_one()
                       for t in (Benchmark, Item, Model, BenchmarkModel, ScoreRow, Score)},
            "scores": conn.execute(text("SELECT model_id, item_pk, metric, value FROM scores "
                                        "ORDER BY model_id, item_pk, metric")).all(),
            "rows": conn.execute(text("SELECT benchmark_id, model_id, metric, n_scores, version FROM score_rows "
                                      "ORDER BY benchmark_id, model_id, metric")).all(),
            "versions": conn.execute(text("SELECT name, data_version FROM benchmarks ORDER BY name")).all(),
        }


def test_packed_rows_round_trip_through_postgresql_copy(pg_engine: Engine) -> None:
    """numpy-encoded float8[] rows go in by binary COPY and come back by array_send bit for bit (NaN = missing,
    -0.0, subnormal-adjacent and huge values, an empty row), and the view shows the present cells."""
    rng = np.random.default_rng(4)
    rows = [rng.normal(size=9) * 1e3, np.full(9, np.nan), np.empty(0), rng.normal(size=5)]
    rows[0][[0, 1, 2, 3]] = [1e-300, -0.0, 0.1 + 0.2, 5e300]
    rows[0][rng.random(9) < 0.3] = np.nan
    with Session(pg_engine) as session:
        cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute("CREATE TEMP TABLE copy_check (k int4, vals float8[])")
        with cursor.copy("COPY copy_check (k, vals) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(COPY_HEADER)
            for k, row in enumerate(rows):
                copy.write(copy_tuple([struct.pack(">i", k), encode_array(row)]))
            copy.write(COPY_TRAILER)
        binary = session.connection().connection.driver_connection.cursor(binary=True)  # type: ignore[union-attr]
        binary.execute("SELECT k, array_send(vals), cardinality(vals) FROM copy_check ORDER BY k")
        got = binary.fetchall()
        cursor.execute("SELECT float8send(vals[1]) FROM copy_check WHERE k = 0")
        first = cursor.fetchone()[0]
        session.rollback()
    assert [k for k, _, _ in got] == [0, 1, 2, 3]
    for (_, data, n), row in zip(got, rows):
        assert n == row.size
        assert decode_array(data).tobytes() == row.tobytes()
    assert first == struct.pack(">d", rows[0][0])


def test_the_write_path_is_copy_on_postgresql_and_batched_on_sqlite(client: TestClient, backend: str) -> None:
    assert client.post("/v1/benchmarks", json={"name": "bulk", "score_min": None,
                                               "score_max": None}).status_code == 201
    rng = np.random.default_rng(0)
    n_models, n_items = 40, 300
    values = rng.normal(size=(n_models, n_items)) * 1e3
    values[rng.random(values.shape) < 0.2] = np.nan
    values[0, 0], values[0, 1], values[1, 0] = 1e-300, 5e300, 0.1 + 0.2
    models, items = [f"m{i}" for i in range(n_models)], [f"q{j}" for j in range(n_items)]
    n_cells = int((~np.isnan(values)).sum())
    before = {"copy": cells_written("copy"), "batched": cells_written("batched")}
    r = client.post("/v1/benchmarks/bulk/scores", content=wide_csv(values, models, items, as_int=False).encode(),
                    headers=CSV)
    assert r.status_code == 200, r.text
    assert r.json()["n_scores"] == n_cells
    used, unused = ("copy", "batched") if backend == "postgresql" else ("batched", "copy")
    assert cells_written(used) - before[used] == n_cells
    assert cells_written(unused) == before[unused]
    # a second upload overwrites every cell (the conflict branch of the upsert) and adds a model
    values2 = np.vstack([np.where(np.isnan(values), np.nan, values + 1.0), rng.random((1, n_items))])
    r = client.post("/v1/benchmarks/bulk/scores",
                    content=wide_csv(values2, [*models, "extra"], items, as_int=False).encode(), headers=CSV)
    assert r.status_code == 200, r.text
    lines = client.get("/v1/benchmarks/bulk/scores", headers={"accept": "text/csv"}).text.splitlines()
    assert lines[0] == "model," + ",".join(items)
    assert [line.split(",")[0] for line in lines[1:]] == [*models, "extra"]
    got = np.array([[float(c) if c else np.nan for c in line.split(",")[1:]] for line in lines[1:]])
    assert got.tobytes() == values2.tobytes()  # exact, bit for bit (repr round trip)


def seeded(client: TestClient, n_models: int = 30, n_items: int = 400) -> tuple[np.ndarray, list[str], list[str]]:
    """A benchmark ``big`` with committed scores (the state a failed upload must leave as it was)."""
    assert client.post("/v1/benchmarks", json={"name": "big"}).status_code == 201
    values = (np.random.default_rng(1).random((n_models, n_items)) < 0.5).astype(float)
    models, items = [f"m{i}" for i in range(n_models)], [f"q{j}" for j in range(n_items)]
    r = client.post("/v1/benchmarks/big/scores", content=wide_csv(values, models, items).encode(), headers=CSV)
    assert r.status_code == 200, r.text
    return values, models, items


def test_a_bad_cell_in_the_last_row_of_a_large_upload_stores_nothing(pg_committed_client: tuple[TestClient, Engine]) -> None:
    client, engine = pg_committed_client
    values, models, items = seeded(client)
    before = table_snapshot(engine)
    # every cell changed, new models and new items, and one bad cell at the very end of the file
    n_models, n_items = 60, 500
    bigger = 1.0 - (np.random.default_rng(2).random((n_models, n_items)) < 0.5).astype(float)
    body = wide_csv(bigger, [f"m{i}" for i in range(n_models)], [f"q{j}" for j in range(n_items)])
    assert body.endswith(",0\n") or body.endswith(",1\n")
    body = body[:-2] + "x\n"
    r = client.post("/v1/benchmarks/big/scores", content=body.encode(), headers=CSV)
    problem = assert_problem(r, 422)
    assert problem["errors"][0]["row"] == n_models + 1 and problem["errors"][0]["column"] == f"q{n_items - 1}"
    assert table_snapshot(engine) == before


@pytest.mark.slow
def test_a_write_cancelled_late_stores_nothing(pg_committed_client: tuple[TestClient, Engine],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The database cancels the write near its end (the bulk statement timeout, while the update of the last
    model's stored row waits on that row, held by another transaction): 503 problem, and none of the rows
    before it are kept."""
    client, engine = pg_committed_client
    values, models, items = seeded(client)
    before = table_snapshot(engine)
    monkeypatch.setenv("EVALPLAN_DB_BULK_STATEMENT_TIMEOUT_S", "2")
    get_settings.cache_clear()
    holder = engine.connect()
    try:
        holder.execute(text("SELECT 1 FROM score_rows r JOIN models m ON m.id = r.model_id "
                            "WHERE m.name = :model FOR UPDATE OF r"), {"model": models[-1]})
        # new models first, then every existing row replaced; the last model's row is written last
        bigger = np.vstack([np.ones((5, len(items))), 1.0 - values])
        body = wide_csv(bigger, [f"new{i}" for i in range(5)] + models, items)
        result: dict[str, object] = {}
        worker = threading.Thread(target=lambda: result.update(
            r=client.post("/v1/benchmarks/big/scores", content=body.encode(), headers=CSV)))
        worker.start()
        worker.join(120)
        assert not worker.is_alive()
    finally:
        holder.rollback()
        holder.close()
        monkeypatch.delenv("EVALPLAN_DB_BULK_STATEMENT_TIMEOUT_S")
        get_settings.cache_clear()
    problem = assert_problem(result["r"], 503)  # type: ignore[arg-type]
    assert problem["errors"][0]["dependency"] == "database"
    assert table_snapshot(engine) == before
    # and the same upload succeeds once nothing holds the row
    r = client.post("/v1/benchmarks/big/scores", content=body.encode(), headers=CSV)
    assert r.status_code == 200, r.text
    assert r.json()["n_scores"] == bigger.size
