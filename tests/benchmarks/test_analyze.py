"""ANALYZE after a bulk load on PostgreSQL (issue 13, failure 9): the planner has statistics at once."""

from __future__ import annotations

import time

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from evalplan.kit.db import ANALYZE_MIN_ROWS
from support.helpers import wide_csv


def last_analyze(engine: Engine) -> float:
    with engine.connect() as conn:
        value = conn.execute(text("SELECT extract(epoch FROM last_analyze) FROM pg_stat_user_tables "
                                  "WHERE relname = 'score_rows'")).scalar()
    return float(value or 0.0)


def test_a_bulk_score_upload_is_analyzed(pg_committed_client: tuple[TestClient, Engine]) -> None:
    client, engine = pg_committed_client
    assert client.post("/v1/benchmarks", json={"name": "bulk"}).status_code == 201
    with engine.connect() as conn:
        started = float(conn.execute(text("SELECT extract(epoch FROM now())")).scalar_one())
    small = client.post("/v1/benchmarks/bulk/scores", content=b"model,a\nm0,1\n", headers={"content-type": "text/csv"})
    assert small.status_code == 200
    time.sleep(1.0)
    assert last_analyze(engine) < started  # a small upload does not analyze
    n_models, n_items = 120, 100
    assert n_models * n_items >= ANALYZE_MIN_ROWS
    values = (np.random.default_rng(0).random((n_models, n_items)) < 0.5).astype(float)
    r = client.post("/v1/benchmarks/bulk/scores", content=wide_csv(values, [f"m{i}" for i in range(n_models)],
                                                                   [f"q{j}" for j in range(n_items)]).encode(),
                    headers={"content-type": "text/csv"})
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 30
    while last_analyze(engine) < started:
        assert time.monotonic() < deadline, "score_rows was not analyzed after the bulk load"
        time.sleep(0.2)
