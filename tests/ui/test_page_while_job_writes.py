"""Issue 34 failure 1: the benchmark page answered 503 after 4-28 s (``database is locked [SQL: INSERT INTO jobs]``)
when a job held SQLite's write lock. A page view needs no write that can lose to a job: it answers 200 at once
while another connection holds the write lock, with the statistics computed inline (small matrix) or without
them (a larger one, whose job it could not start; the next view tries again)."""

from __future__ import annotations

import sqlite3
import threading
import time

import numpy as np
import pytest

from evalplan.ui.pages import benchmarks as benchmark_page
from support.helpers import upload_scores_csv

HOLD_S = 8.0


def matrix_csv(n_models: int = 40, n_items: int = 30, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    lines = ["model," + ",".join(f"q{j}" for j in range(n_items))]
    lines += [f"m{i}," + ",".join(str(int(v)) for v in rng.random(n_items) < 0.6) for i in range(n_models)]
    return "\n".join(lines) + "\n"


class WriteLockHolder(threading.Thread):
    """Another connection in a write transaction (as a job's) for ``HOLD_S`` seconds."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True)
        self.path, self.locked, self.done = path, threading.Event(), threading.Event()

    def run(self) -> None:
        connection = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("UPDATE benchmarks SET description = description")
        self.locked.set()
        time.sleep(HOLD_S)
        connection.execute("ROLLBACK")
        connection.close()
        self.done.set()


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize("inline", [True, False], ids=["inline-stats", "stats-job"])
def test_benchmark_page_answers_at_once_while_a_job_holds_the_write_lock(committed_client, database_urls,
                                                                         monkeypatch, inline) -> None:
    if not inline:
        monkeypatch.setattr(benchmark_page, "INLINE_STATS_CELLS", 0)  # as a matrix too large to compute inline
    for name in ("warm", "b"):
        assert committed_client.post("/v1/benchmarks", json={"name": name, "score_kind": "binary"}).status_code == 201
        upload_scores_csv(committed_client, name, matrix_csv())
    assert committed_client.get("/ui/benchmarks/warm").status_code == 200  # the chart renderer's cold start
    holder = WriteLockHolder(database_urls["sqlite"].removeprefix("sqlite:///"))
    holder.start()
    assert holder.locked.wait(10)
    started = time.perf_counter()
    page = committed_client.get("/ui/benchmarks/b")
    elapsed = time.perf_counter() - started
    assert not holder.done.is_set(), "the write lock was released before the page answered"
    holder.join()
    assert page.status_code == 200, page.text[:500]
    assert elapsed < HOLD_S / 2, f"the page waited {elapsed:.1f} s on another connection's write lock"
    if inline:
        assert "Model means" in page.text and "Item difficulty" in page.text
    # once the lock is gone the next view starts the job (or shows the statistics)
    again = committed_client.get("/ui/benchmarks/b")
    assert again.status_code == 200
    assert ("Model means" in again.text) if inline else ("/ui/jobs/job_" in again.text)
