"""Issue 24 item 10: after an API crash a keyed retry succeeds within 30 s, not 300 s.

* the lease of an unfinished keyed request is short (``IDEMPOTENCY_LEASE_S`` default 20 s) and the
  middleware heartbeats it while the request runs, so a long request is never taken over by a retry;
* the client (``evalplan.client``) retries ``409 idempotency-in-progress`` honouring ``Retry-After``
  for up to ``in_progress_wait_s``, so a retry after a crash goes through once the lease has expired.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import httpx
import numpy as np
import pytest
from sqlalchemy import Engine, select, text

from evalplan.client.transport import Transport
from evalplan.db.models import IdempotencyRecord, Model, utcnow
from evalplan.kit.settings import Settings
from support.browser import LiveServer, serving
from support.helpers import wide_csv


@pytest.fixture
def short_lease_server(engines: dict[str, Engine], database_urls: dict[str, str]) -> Iterator[LiveServer]:
    # PostgreSQL: on SQLite the upload holds the one write lock, so nothing else (a renewal, a retry) writes
    with serving(engines["postgresql"], database_urls["postgresql"], idempotency_lease_s=1.0) as running:
        yield running


def test_the_default_lease_frees_a_crashed_requests_key_within_30_s() -> None:
    assert Settings(database_url="sqlite://").idempotency_lease_s <= 30


@pytest.mark.slow
def test_a_running_keyed_request_keeps_its_key_past_the_lease(short_lease_server: LiveServer,
                                                             engines: dict[str, Engine]) -> None:
    """Lease 1 s: a keyed upload that runs for seconds is heartbeated; a retry 2.5 s in gets 409, never a
    second run of the same request. The upload is held for those seconds by a real lock, not by its size (a
    fast machine uploads any test-sized matrix in under a second): the test's own transaction locks
    ``score_rows`` against writes until the retry has been answered, so the upload waits inside the app, past
    its claim of the key, while the middleware keeps renewing the key's lease in ``idempotency_keys``."""
    http = short_lease_server.http
    assert http.post("/v1/benchmarks", json={"name": "slow"}).status_code == 201
    rng = np.random.default_rng(0)
    body = wide_csv((rng.random((20, 50)) < 0.5).astype(float), [f"m{i}" for i in range(20)],
                    [f"q{j}" for j in range(50)]).encode()
    headers = {"content-type": "text/csv", "idempotency-key": "long-upload"}
    first: dict[str, object] = {}

    def upload() -> None:
        started = time.monotonic()
        with httpx.Client(base_url=short_lease_server.url, timeout=300) as c:
            first["response"] = c.post("/v1/benchmarks/slow/scores", content=body, headers=headers)
        first["seconds"] = time.monotonic() - started

    with engines["postgresql"].connect() as lock:
        lock.execute(text("LOCK TABLE score_rows IN EXCLUSIVE MODE"))  # reads go on, writes wait
        thread = threading.Thread(target=upload)
        thread.start()
        time.sleep(2.5)
        retry = http.post("/v1/benchmarks/slow/scores", content=body, headers=headers)
        still_running = thread.is_alive()
        lock.rollback()
    thread.join(timeout=300)
    response = first["response"]
    assert still_running, "the upload finished while score_rows was locked: it did not wait on the lock"
    assert isinstance(response, httpx.Response) and response.status_code == 200, response
    assert float(first["seconds"]) > 2.5
    assert retry.status_code == 409, (retry.status_code, retry.text[:300])  # in progress, not taken over
    replay = http.post("/v1/benchmarks/slow/scores", content=body, headers=headers)
    assert replay.status_code == 200 and replay.headers.get("idempotent-replayed") == "true"
    assert replay.content == response.content


@pytest.mark.slow
def test_the_client_retries_an_in_progress_key_until_the_crashed_lease_expires(
        engines: dict[str, Engine], database_urls: dict[str, str]) -> None:
    with serving(engines["sqlite"], database_urls["sqlite"]) as server:
        transport = Transport(server.url, retries=3, backoff=0.2)
        transport.call("POST", "/v1/models", json_body={"name": "orphan"}, idempotency_key="orphan")
        # as an API killed mid-request leaves it: the record in progress (lease 8 s left), nothing committed
        with server.session_factory() as session:
            record = session.scalars(select(IdempotencyRecord).where(IdempotencyRecord.key == "orphan")).one()
            record.status_code, record.response_body, record.response_headers = None, None, None
            record.lease_expires_at = utcnow() + timedelta(seconds=8)
            session.delete(session.scalars(select(Model).where(Model.name == "orphan")).one())
            session.commit()
        started = time.monotonic()
        created = transport.call("POST", "/v1/models", json_body={"name": "orphan"}, idempotency_key="orphan")
        waited = time.monotonic() - started
        assert created["name"] == "orphan" and 7 <= waited <= 30, waited
