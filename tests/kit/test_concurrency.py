"""Concurrent first use of a name (issue 13, failure 1): a real uvicorn server, real threads, both backends.

Twenty uploads that all introduce model ``new-m`` (each to its own benchmark) start together
behind a barrier; each must answer 200 and every score must be stored. Two lm-eval imports of
one new model (and one new task) likewise.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select

from evalplan.db.models import Benchmark, Model, Score
from support.browser import LiveServer, serving
from support.lm_eval_logs import make_docs, samples_filename, samples_log_bytes

N_CLIENTS = 20


@pytest.fixture
def server(engines: dict[str, Engine], database_urls: dict[str, str], backend: str) -> Iterator[LiveServer]:
    with serving(engines[backend], database_urls[backend]) as running:
        yield running


def all_at_once(n: int, call: Callable[[httpx.Client, int], httpx.Response], base_url: str) -> list[httpx.Response]:
    """``n`` threads, each with its own connection, released together by a barrier."""
    barrier = threading.Barrier(n)

    def one(i: int) -> httpx.Response:
        with httpx.Client(base_url=base_url, timeout=120) as http:
            barrier.wait()
            return call(http, i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


def test_twenty_uploads_introducing_one_model(server: LiveServer) -> None:
    for i in range(N_CLIENTS):
        assert server.http.post("/v1/benchmarks", json={"name": f"race-{i}"}).status_code == 201

    def upload(http: httpx.Client, i: int) -> httpx.Response:
        return http.post(f"/v1/benchmarks/race-{i}/scores", content=f"model,q1,q2,q3\nnew-m,1,0,{i % 2}\n".encode(),
                         headers={"content-type": "text/csv"})

    responses = all_at_once(N_CLIENTS, upload, server.url)
    assert [r.status_code for r in responses] == [200] * N_CLIENTS, [r.text for r in responses if r.status_code != 200]
    with server.session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Model).where(Model.name == "new-m")) == 1
        assert session.scalar(select(func.count()).select_from(Score)) == 3 * N_CLIENTS
    for i in range(N_CLIENTS):
        text = server.http.get(f"/v1/benchmarks/race-{i}/scores").text
        assert text.splitlines() == ["model,q1,q2,q3", f"new-m,1,0,{i % 2}"]


@pytest.mark.slow
def test_large_uploads_sharing_new_models_in_different_orders(server: LiveServer) -> None:
    """Eight uploads of thousands of cells each (the bulk write: COPY + one upsert on PostgreSQL), each to its own
    benchmark, all introducing the same three new models, each listing them in another order: all 200, every
    cell stored, one row per model (new names are inserted in name order, so two uploads never lock the same
    names in opposite orders)."""
    n, n_items = 8, 2500
    shared = ["shared-a", "shared-b", "shared-c"]
    for i in range(n):
        assert server.http.post("/v1/benchmarks", json={"name": f"big-{i}"}).status_code == 201
    bodies = []
    for i in range(n):
        names = [shared[(i + k) % 3] for k in range(3)]
        names = names if i % 2 else names[::-1]
        rows = [f"{name}," + ",".join(str((i + j + k) % 2) for j in range(n_items)) for k, name in enumerate(names)]
        rows.append(f"own-{i}," + ",".join("1" for _ in range(n_items)))
        bodies.append(("model," + ",".join(f"q{j}" for j in range(n_items)) + "\n" + "\n".join(rows) + "\n").encode())

    def upload(http: httpx.Client, i: int) -> httpx.Response:
        return http.post(f"/v1/benchmarks/big-{i}/scores", content=bodies[i], headers={"content-type": "text/csv"})

    responses = all_at_once(n, upload, server.url)
    assert [r.status_code for r in responses] == [200] * n, [r.text for r in responses if r.status_code != 200]
    assert [r.json()["n_scores"] for r in responses] == [4 * n_items] * n
    with server.session_factory() as session:
        assert sorted(session.scalars(select(Model.name))) == sorted([*shared, *(f"own-{i}" for i in range(n))])
        assert session.scalar(select(func.count()).select_from(Score)) == 4 * n_items * n
    for i in range(n):
        got = server.http.get(f"/v1/benchmarks/big-{i}/scores").text
        assert got == bodies[i].decode()


def test_creating_one_model_twice_at_once_gives_201_and_409(server: LiveServer) -> None:
    responses = all_at_once(8, lambda http, _i: http.post("/v1/models", json={"name": "twin"}), server.url)
    codes = sorted(r.status_code for r in responses)
    assert codes == [201] + [409] * 7, [r.text for r in responses]
    for r in responses:
        if r.status_code == 409:
            assert r.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize("same_task", [False, True], ids=["two-tasks", "one-task"])
def test_two_lm_eval_imports_of_one_new_model(server: LiveServer, same_task: bool) -> None:
    docs = make_docs(12, seed=3)

    def files(i: int) -> list[tuple[str, Any]]:
        task = "race_task" if same_task else f"race_task_{i}"
        return [("files", (samples_filename(task), samples_log_bytes(task, docs, seed=4 + i), "application/jsonl"))]

    responses = all_at_once(2, lambda http, i: http.post("/v1/imports/lm-eval", data={"model": "fresh-model"},
                                                         files=files(i)), server.url)
    assert [r.status_code for r in responses] == [201, 201], [r.text for r in responses]
    created = [r.json()["benchmarks"][0]["benchmark_created"] for r in responses]
    with server.session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Model).where(Model.name == "fresh-model")) == 1
        n_benchmarks = session.scalar(select(func.count()).select_from(Benchmark))
        n_scores = session.scalar(select(func.count()).select_from(Score))
    if same_task:
        assert sorted(created) == [False, True] and n_benchmarks == 1
        assert n_scores == 12  # one model, one task: the second import upserts the same cells
    else:
        assert created == [True, True] and n_benchmarks == 2
        assert n_scores == 24
