"""Issue 34: the leaderboard read every cell through the per-cell ``scores`` view, whose SQLite plan scanned all
score rows once per item (MuSR's 429 x 756: minutes), and a coreset's provenance hash did the same inside the
selection job's write transaction (every other writer waited). Both now read the score rows themselves."""

from __future__ import annotations

import time

import numpy as np
import pytest
from sqlalchemy import event, select, text

from evalplan.coresets.curation_repository import SQLITE_SCORE_LINES
from evalplan.db.models import Benchmark
from support.helpers import upload_scores_csv

N_MODELS, N_ITEMS = 300, 300


def matrix_csv(n_models: int, n_items: int, seed: int = 0, missing_rows: int = 0) -> str:
    rng = np.random.default_rng(seed)
    lines = ["model," + ",".join(f"q{j}" for j in range(n_items))]
    for i in range(n_models):
        cells = [str(int(v)) for v in rng.random(n_items) < 0.6]
        if i < missing_rows:
            cells[i % n_items] = ""
        lines.append(f"m{i}," + ",".join(cells))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("backend", ["sqlite"])
def test_leaderboard_of_a_300_x_300_benchmark_is_fast_and_exact(client) -> None:
    assert client.post("/v1/benchmarks", json={"name": "b", "score_kind": "binary"}).status_code == 201
    csv_text = matrix_csv(N_MODELS, N_ITEMS, missing_rows=5)
    upload_scores_csv(client, "b", csv_text)
    started = time.perf_counter()
    board = client.get("/v1/leaderboard", params={"benchmarks": "b", "limit": 1000})
    elapsed = time.perf_counter() - started
    assert board.status_code == 200, board.text
    assert elapsed < 5.0, f"leaderboard took {elapsed:.1f} s"  # through the view: ~30 s here
    rows = [line.split(",") for line in csv_text.strip().split("\n")[1:]]
    expected = {r[0]: float(np.mean([float(v) for v in r[1:]])) for r in rows if "" not in r[1:]}
    got = {row["model"]: row["cells"]["b"] for row in board.json()["items"]}
    measured = {m: c["score"] for m, c in got.items() if c is not None and c["kind"] == "measured"}
    assert measured.keys() == expected.keys() and len(measured) == N_MODELS - 5
    assert all(abs(measured[m] - expected[m]) < 1e-12 for m in expected)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_score_lines_of_the_provenance_hash_are_the_views_rows(client, db_session_factory) -> None:
    assert client.post("/v1/benchmarks", json={"name": "b", "score_kind": "continuous"}).status_code == 201
    upload_scores_csv(client, "b", "model,x,y,z\nm2,0.5,,1\nm1,0,0.25,\n")
    upload_scores_csv(client, "b", "model,y,w\nm3,1,0.75\n", metric="acc")
    with db_session_factory() as session:
        bench = session.scalars(select(Benchmark).where(Benchmark.name == "b")).one()
        fast = session.execute(text(SQLITE_SCORE_LINES), {"b": bench.id}).all()
        view = session.execute(text(
            "SELECT models.name, items.item_id, scores.metric, scores.value FROM scores JOIN items ON items.pk = "
            "scores.item_pk JOIN models ON models.id = scores.model_id WHERE items.benchmark_id = :b "
            "ORDER BY models.name, items.item_id, scores.metric"), {"b": bench.id}).all()
    assert [tuple(r) for r in fast] == [tuple(r) for r in view] and len(fast) == 6


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_selection_jobs_write_transaction_reads_no_scores(committed_client, engine) -> None:
    """save_selection hashes the data (a scan of every score) before its write transaction, never inside it."""
    assert committed_client.post("/v1/benchmarks", json={"name": "b", "score_kind": "binary"}).status_code == 201
    upload_scores_csv(committed_client, "b", matrix_csv(20, 40))
    in_write: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
        if conn.get_execution_options().get("evalplan_write") and conn.in_transaction():
            in_write.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        r = committed_client.post("/v1/coresets", json={"method": "mrmr", "benchmarks": ["b"], "budget": 5,
                                                        "reference_models": "all"})
        assert r.status_code == 202, r.text
        from support.helpers import wait_for_job
        assert wait_for_job(committed_client, r.json()["job"]["id"])["status"] == "succeeded"
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert any("coreset_items" in s for s in in_write)  # the listener saw the selection's write
    scans = [s for s in in_write if "json_each" in s or " scores " in f" {s} " or "FROM scores" in s]
    assert not scans, scans
