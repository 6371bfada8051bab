"""Fault injection (issue 13): a database that accepts and never answers, ``kill -9`` of a real
``evalplan worker`` (main process and children) mid-job, ``kill -9`` of a real ``evalplan serve``
mid-keyed-request. Real PostgreSQL, Redis and processes; the bounds are asserted, the times printed.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser import _serve
from helpers import settings_for

from app.main import create_app

ROOT = Path(__file__).resolve().parent.parent


class Blackhole:
    """A TCP server that accepts connections and never answers (a hung database host)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    hole = Blackhole()
    yield hole
    hole.close()


def timed(call: Any) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def test_unreachable_database_gives_fast_503s_and_health_answers(blackhole: Blackhole) -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{blackhole.port}/evalplan"
    app = create_app(settings_for(url, db_connect_timeout_s=1.0, housekeeping=False))
    server, thread, base = _serve(app)
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            health, t_health = timed(lambda: http.get("/health"))
            assert health.status_code == 200 and t_health < 1.5
            for call in (lambda: http.get("/v1/benchmarks"),
                         lambda: http.post("/v1/models", json={"name": "m"}),
                         lambda: http.post("/v1/models", json={"name": "m"}, headers={"idempotency-key": "k1"})):
                r, elapsed = timed(call)
                assert r.status_code == 503, r.text
                assert r.headers["content-type"].startswith("application/problem+json")
                assert r.headers["retry-after"]
                assert r.json()["errors"][0]["dependency"] == "database"
                assert elapsed < 4.0, elapsed
            ready, t_ready = timed(lambda: http.get("/health/ready"))
            assert ready.status_code == 503 and t_ready < 4.0
            assert ready.headers["content-type"].startswith("application/problem+json")
            assert [e["dependency"] for e in ready.json()["errors"]] == ["database"]

            # 60 DB requests at once (more than the thread pool and the connection pool) while
            # /health is asked: it keeps answering at once, and every DB request is a 503.
            def db_call(i: int) -> int:
                with httpx.Client(base_url=base, timeout=60) as own:
                    headers = {"idempotency-key": f"k-{i}"} if i % 2 else {}
                    return own.post("/v1/models", json={"name": f"m{i}"}, headers=headers).status_code

            with ThreadPoolExecutor(max_workers=60) as pool:
                futures = [pool.submit(db_call, i) for i in range(60)]
                time.sleep(0.5)
                health_times = []
                for _ in range(10):
                    r, elapsed = timed(lambda: http.get("/health"))
                    assert r.status_code == 200
                    health_times.append(elapsed)
                    time.sleep(0.1)
                codes = [f.result() for f in futures]
            print(f"health under a dead database: median {sorted(health_times)[5] * 1000:.0f} ms, "
                  f"max {max(health_times) * 1000:.0f} ms; "
                  f"first 503 in {elapsed:.2f} s; ready in {t_ready:.2f} s")
            # (the loop also accepts the 60 connections: on a loaded 2-core box one answer may lag)
            assert sorted(health_times)[len(health_times) // 2] < 0.1 and max(health_times) < 2.0, health_times
            assert set(codes) == {503}, codes
    finally:
        server.should_exit = True
        thread.join(timeout=20)
