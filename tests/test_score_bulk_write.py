"""The bulk score write (issue 13, the 200 MB upload): on PostgreSQL a binary COPY into a temporary table and
one set-based upsert, on SQLite the batched upsert; exact values either way; all-or-nothing when the body
is bad late in the file or the database cancels the write late.
"""

from __future__ import annotations

import struct
import threading

import numpy as np
import pytest
from fastapi.testclient import TestClient
from helpers import assert_problem, wide_csv
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session

from app.benchmarks.score_matrix import COPY_HEADER, COPY_TRAILER, binary_copy_rows, item_major_rounds
from app.db.models import Benchmark, BenchmarkModel, Item, Model, Score
from app.kit.observability import HTTP_REGISTRY
from app.kit.settings import get_settings

CSV = {"content-type": "text/csv"}


def cells_written(path: str) -> float:
    return HTTP_REGISTRY.get_sample_value("evalplan_score_cells_written_total", {"path": path}) or 0.0


def table_snapshot(engine: Engine) -> dict[str, object]:
    with engine.connect() as conn:
        return {
            "counts": {t.__tablename__: conn.execute(select(func.count()).select_from(t)).scalar_one()
                       for t in (Benchmark, Item, Model, BenchmarkModel, Score)},
            "scores": conn.execute(text("SELECT model_id, item_pk, metric, value FROM scores "
                                        "ORDER BY model_id, item_pk, metric")).all(),
            "versions": conn.execute(text("SELECT name, data_version FROM benchmarks ORDER BY name")).all(),
        }


def test_cells_go_item_major_in_rounds() -> None:
    rng = np.random.default_rng(3)
    values = rng.random((7, 11))
    values[rng.random(values.shape) < 0.3] = np.nan
    rounds = list(item_major_rounds(values, cells=15))
    assert len(rounds) == 6  # 15 cells a round: 2 items of 7 models each
    rows = np.concatenate([r for r, _, _ in rounds])
    cols = np.concatenate([c for _, c, _ in rounds])
    cells = np.concatenate([v for _, _, v in rounds])
    expected_cols, expected_rows = np.nonzero(~np.isnan(values.T))  # every model's cell of item 0, then item 1...
    assert cols.tolist() == expected_cols.tolist() and rows.tolist() == expected_rows.tolist()
    assert cells.tobytes() == values[rows, cols].tobytes()


@pytest.mark.parametrize("with_metric", [True, False], ids=["scores-layout", "staging-layout"])
def test_binary_copy_rows_round_trip_through_postgresql_copy(pg_engine: Engine, with_metric: bool) -> None:
    """The numpy-encoded COPY rows read back bit for bit, for model ids of several byte lengths."""
    model_ids = np.array([b"md_0190abcdef0123456789abcd", b"m", b"a-model-id-of-forty-characters-00000000", b"md_x"])
    values = np.random.default_rng(4).normal(size=(4, 9)) * 1e3
    values[np.random.default_rng(5).random(values.shape) < 0.3] = np.nan
    values[0, 0], values[1, 0], values[2, 1], values[3, 2] = 1e-300, -0.0, 0.1 + 0.2, 5e300
    pks = np.array([10**12 + 7 * j for j in range(9)], dtype=np.int64)
    metric = b"acc,norm@k:5/x+y" if with_metric else None
    with Session(pg_engine) as session:
        cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
        columns = "model_id, item_pk, metric, value" if with_metric else "model_id, item_pk, value"
        cursor.execute("CREATE TEMP TABLE copy_check (model_id varchar(40), item_pk int8, metric text, value float8)")
        with cursor.copy(f"COPY copy_check ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(COPY_HEADER)
            for rows, cols, cells in item_major_rounds(values, cells=10):
                copy.write(binary_copy_rows(model_ids, rows, pks[cols], cells, metric))
            copy.write(COPY_TRAILER)
        cursor.execute("SELECT model_id, item_pk, metric, float8send(value) FROM copy_check")
        got = sorted(cursor.fetchall())
        session.rollback()
    rows, cols = np.nonzero(~np.isnan(values))
    expected = sorted((model_ids[i].decode(), int(pks[j]), metric.decode() if metric else None,
                       struct.pack(">d", values[i, j])) for i, j in zip(rows.tolist(), cols.tolist()))
    assert got == expected


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


def test_a_write_cancelled_late_stores_nothing(pg_committed_client: tuple[TestClient, Engine],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The database cancels the upsert near its end (the bulk statement timeout, while the last item's cells
    wait on a row another transaction holds): 503 problem, and none of the cells before it are kept."""
    client, engine = pg_committed_client
    values, models, items = seeded(client)
    before = table_snapshot(engine)
    monkeypatch.setenv("EVALPLAN_DB_BULK_STATEMENT_TIMEOUT_S", "2")
    get_settings.cache_clear()
    holder = engine.connect()
    try:
        holder.execute(text("SELECT 1 FROM scores s JOIN items i ON i.pk = s.item_pk JOIN models m "
                            "ON m.id = s.model_id WHERE i.item_id = :item AND m.name = :model FOR UPDATE OF s"),
                       {"item": items[-1], "model": models[-1]})
        # new models first, then every existing cell overwritten; the last item is merged last (item-major)
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
