"""Issue 24 item 8: memory caps. A wide CSV naming 1,000,000 items (2 rows) and an inspect ``.eval`` zip
whose ``header.json`` decompresses to far more than its size are refused with 413 before the data is
materialised; the Python-side peak (tracemalloc, numpy included) stays under 300 MB and nothing is stored."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import Benchmark, Item, Model, Score
from evalplan.main import create_app
from support.helpers import NoJobsDispatcher, assert_problem, count_rows, create_benchmark, settings_for

MB = 1024 * 1024


@pytest.fixture
def capped_client(db_session_factory: sessionmaker[Session], database_urls: dict[str, str],
                  backend: str) -> Iterator[TestClient]:
    app = create_app(settings_for(database_urls[backend], max_decompressed_bytes=32 * MB,
                                  inline_import_max_bytes=50 * MB),
                     session_factory=db_session_factory, dispatcher=NoJobsDispatcher())
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def peak_of(call: Callable[[], object]) -> tuple[object, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_csv_header_of_a_million_items_is_413_without_storing(
        capped_client: TestClient, db_session_factory: sessionmaker[Session]) -> None:
    create_benchmark(capped_client, "wide", score_kind="binary")
    n = 1_000_000
    header = "model," + ",".join(f"q{j}" for j in range(n))
    body = (header + "\nm1," + ",".join("1" for _ in range(n)) + "\nm2," + ",".join("0" for _ in range(n))
            + "\n").encode()
    before = count_rows(db_session_factory, Item, Model, Score)
    response, peak = peak_of(lambda: capped_client.post("/v1/benchmarks/wide/scores", content=body,
                                                        headers={"content-type": "text/csv"}))
    problem = assert_problem(response, 413)  # before: 200 and 1,000,000 items stored (peak 1.76 GB)
    assert "EVALPLAN_MAX_ITEMS_PER_UPLOAD" in problem["detail"]
    assert count_rows(db_session_factory, Item, Model, Score) == before
    assert peak < max(2 * len(body), 300 * MB), peak


def test_an_eval_zip_that_decompresses_past_the_cap_is_413(capped_client: TestClient,
                                                           db_session_factory: sessionmaker[Session]) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("header.json", "w") as member:
            chunk = b" " * MB
            for _ in range(96):  # 96 MB of spaces: ~100 KB compressed
                member.write(chunk)
    data = buffer.getvalue()
    assert len(data) < 2 * MB
    before = count_rows(db_session_factory, Benchmark, Item, Score)
    response, peak = peak_of(lambda: capped_client.post(
        "/v1/imports/inspect", files=[("files", ("bomb.eval", data, "application/zip"))]))
    problem = assert_problem(response, 413)  # before: the reader inflated all of it, then 422
    assert problem["errors"][0]["member"] == "header.json"
    assert count_rows(db_session_factory, Benchmark, Item, Score) == before
    assert peak < 40 * MB, peak
