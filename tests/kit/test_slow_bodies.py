"""Issue 24 item 7: slow request bodies do not exhaust the database pool (real uvicorn on loopback,
PostgreSQL, pool 10 + 10). 24 uploads that send their 200-byte body at ~10 B/s are read by the
middleware before the app takes a connection, so other routes answer meanwhile; each slow one ends in
408 after the grace period; a client's concurrent bodies beyond the limit are 429."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from sqlalchemy import Engine

from support.browser import LiveServer, serving


@pytest.fixture
def slow_server(engines: dict[str, Engine], database_urls: dict[str, str]) -> Iterator[LiveServer]:
    with serving(engines["postgresql"], database_urls["postgresql"], body_min_rate_bytes_s=100.0,
                 body_read_grace_s=4.0, max_concurrent_uploads_per_client=30) as running:
        yield running


def slow_upload(url: str, out: list[str], stop: threading.Event) -> None:
    """POST a 200-byte CSV at ~10 B/s; record the status line (or what happened)."""
    parsed = urlparse(url)
    body = b"model," + b",".join(f"q{i}".encode() for i in range(40))[:190].ljust(190, b"x") + b"\n"
    head = (f"POST /v1/benchmarks/slow/scores HTTP/1.1\r\nHost: {parsed.hostname}\r\nContent-Type: text/csv\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=30) as sock:
            sock.sendall(head)
            for i in range(0, len(body), 2):
                if stop.is_set():
                    break
                try:
                    sock.sendall(body[i:i + 2])
                except OSError:
                    break
                time.sleep(0.2)
            sock.settimeout(30)
            out.append(sock.recv(200).split(b"\r\n", 1)[0].decode())
    except OSError as exc:
        out.append(f"error {exc}")


@pytest.mark.slow
def test_slow_senders_hold_no_database_connection(slow_server: LiveServer) -> None:
    http = slow_server.http
    assert http.post("/v1/benchmarks", json={"name": "slow"}).status_code == 201
    results: list[str] = []
    stop = threading.Event()
    threads = [threading.Thread(target=slow_upload, args=(slow_server.url, results, stop)) for _ in range(24)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.5)  # every slow sender is mid-body
        for _ in range(5):
            started = time.monotonic()
            r = http.get("/v1/benchmarks")
            assert r.status_code == 200, r.text  # before: 503 once the pool was held by the slow uploads
            assert time.monotonic() - started < 3.0
            r = http.post("/v1/benchmarks", json={"name": f"fast-{time.monotonic_ns()}"})
            assert r.status_code == 201, r.text
    finally:
        for t in threads:
            t.join(timeout=60)
        stop.set()
    assert len(results) == 24 and all(" 408 " in r for r in results), results


@pytest.mark.slow
def test_concurrent_bodies_per_client_are_limited(engines: dict[str, Engine], database_urls: dict[str, str]) -> None:
    with serving(engines["postgresql"], database_urls["postgresql"], body_min_rate_bytes_s=100.0,
                 body_read_grace_s=3.0, max_concurrent_uploads_per_client=4) as server:
        results: list[str] = []
        stop = threading.Event()
        threads = [threading.Thread(target=slow_upload, args=(server.url, results, stop)) for _ in range(6)]
        for t in threads:
            t.start()
            time.sleep(0.1)
        for t in threads:
            t.join(timeout=60)
        assert sorted(r.split(" ")[1] for r in results) == ["408"] * 4 + ["429"] * 2, results
