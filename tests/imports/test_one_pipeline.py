"""lm-eval and inspect_ai imports go through one pipeline (issue 36 item 1): they resolve and create a benchmark
the same way. Shown on the case where the two paths used to differ: two first imports of one new benchmark name
at once, the second reading before the first commits (PostgreSQL: SQLite runs one writer at a time)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, event, func, select, text

from evalplan.db.models import Benchmark, Score
from support.browser import LiveServer, serving
from support.harness_runs import inspect_log
from support.lm_eval_logs import make_docs, samples_filename, samples_log_bytes

NAME = "arith"  # the inspect log's task; the lm-eval file is named after it too


@pytest.fixture
def pg_server(engines: dict[str, Engine], database_urls: dict[str, str]) -> Iterator[LiveServer]:
    with serving(engines["postgresql"], database_urls["postgresql"]) as running:
        yield running


def _request(harness: str, model: str, tmp_path: Path) -> dict[str, Any]:
    """The multipart request of one import of benchmark ``NAME`` by ``model``."""
    if harness == "lm-eval":
        content = samples_log_bytes(NAME, make_docs(8, seed=3), seed=4)
        return {"data": {"model": model}, "files": [("files", (samples_filename(NAME), content, "application/jsonl"))]}
    log = inspect_log(tmp_path, n=8)
    return {"data": {"model": model}, "files": [("files", (log.name, log.read_bytes(), "application/octet-stream"))]}


def _wait_for_blocked_insert(engine: Engine, timeout: float = 30.0) -> None:
    """Until another connection waits on a lock in an ``INSERT INTO benchmarks`` (or ``timeout`` passed)."""
    deadline = time.monotonic() + timeout
    with engine.connect() as conn:
        while time.monotonic() < deadline:
            waiting = conn.scalar(text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                       "AND query ILIKE 'INSERT INTO benchmarks%'"))
            conn.rollback()
            if waiting:
                return
            time.sleep(0.05)


@pytest.mark.parametrize("harness", ["lm-eval", "inspect"])
def test_two_first_imports_of_one_new_benchmark_name(pg_server: LiveServer, engines: dict[str, Engine],
                                                     harness: str, tmp_path: Path) -> None:
    """The first import inserts the benchmark and holds its transaction open until the second, which read before
    that row was committed, waits on it; then the first commits. Both answer 201: the second imports into the
    first's benchmark (``benchmark_created`` false), one benchmark holds both models' scores, and its creation is
    audited as an import. (Before issue 36, inspect's second import answered 409 "already exists" here while
    lm-eval's went through.)"""
    engine = engines["postgresql"]
    first_insert = threading.Event()

    def hold_first_insert(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO BENCHMARKS") and not first_insert.is_set():
            first_insert.set()
            _wait_for_blocked_insert(engine)

    requests = [_request(harness, model, tmp_path) for model in ("org/first", "org/second")]
    event.listen(engine, "after_cursor_execute", hold_first_insert)
    try:
        with httpx.Client(base_url=pg_server.url, timeout=120) as a, httpx.Client(base_url=pg_server.url,
                                                                                   timeout=120) as b:
            results: list[httpx.Response] = []
            first = threading.Thread(target=lambda: results.append(a.post(f"/v1/imports/{harness}", **requests[0])))
            first.start()
            assert first_insert.wait(60), "the first import never inserted its benchmark"
            second = b.post(f"/v1/imports/{harness}", **requests[1])
            first.join(120)
    finally:
        event.remove(engine, "after_cursor_execute", hold_first_insert)
    assert [r.status_code for r in results] == [201], [r.text for r in results]
    assert second.status_code == 201, second.text

    def created(response: httpx.Response) -> bool:
        body = response.json()
        return bool(body["benchmarks"][0]["benchmark_created"] if harness == "lm-eval" else body["benchmark_created"])

    assert (created(results[0]), created(second)) == (True, False)
    with pg_server.session_factory() as session:
        assert session.scalars(select(Benchmark.name)).all() == [NAME]
        assert session.scalar(select(func.count()).select_from(Score)) == 16  # 8 items x 2 models
    audit = pg_server.http.get("/v1/audit").json()["items"]
    assert [e["detail"] for e in audit if e["resource_type"] == "benchmark"] == [{"name": NAME, "via": "import"}]
