"""Helpers shared by the tests (importable as ``helpers``: pyproject sets pytest's ``pythonpath``).

* :func:`assert_problem`: an RFC 9457 problem+json response with the expected status.
* :func:`create_benchmark`, :func:`upload_items`, :func:`upload_scores_csv`, :func:`upload_score_cells`,
  :func:`upload_matrix`, :func:`wide_csv`: data through the HTTP API, each asserting success.
* :func:`count_rows`: rows of ORM models, to check that a rejected request stored nothing.
* :func:`wait_for_job`, :func:`settings_for`, :class:`NoJobsDispatcher`: jobs and app settings of the
  fixtures in ``conftest``.
* :func:`free_port`, :func:`embedded_server`: a real ``evalplan serve`` subprocess (embedded SQLite) and
  its :class:`~evalplan.client.EvalplanClient`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from evalplan.client import EvalplanClient, EvalplanError
from evalplan.db.models import LOCAL_TEAM_ID, Base, Team, utcnow
from evalplan.kit.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = "application/problem+json"
CSV = {"content-type": "text/csv"}
NDJSON = {"content-type": "application/x-ndjson"}


def two_pl(seed: int, n_models: int = 24, n_items: int = 60) -> np.ndarray:
    """0/1 scores (float) of ``n_models`` x ``n_items`` drawn from a 2PL IRT population (seeded): abilities
    N(0, 1), difficulties N(0, 1), discriminations lognormal(0, 0.4). The tests' generated benchmark."""
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.0, 0.4, n_items)
    b = rng.normal(0.0, 1.0, n_items)
    theta = rng.normal(0.0, 1.0, n_models)
    p = 1.0 / (1.0 + np.exp(-a[None, :] * (theta[:, None] - b[None, :])))
    return (rng.random(p.shape) < p).astype(float)


def assert_problem(response: Response, status: int) -> dict[str, Any]:
    """The response is a problem+json with ``status``, a non-empty type, title and detail, no traceback."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM), response.headers["content-type"]
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    for key in ("type", "title", "detail"):
        assert isinstance(body[key], str) and body[key], key
    assert "Traceback" not in response.text
    return body


def create_benchmark(client: TestClient, name: str, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/benchmarks", json={"name": name, **fields})
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


def upload_items(client: TestClient, bench: str, items: Iterable[dict[str, Any]] | Iterable[str]) -> dict[str, Any]:
    """Items as JSONL; plain ids get the prompt ``item <id>``."""
    records = [{"id": i, "prompt": f"item {i}"} if isinstance(i, str) else i for i in items]
    body = "".join(json.dumps(r) + "\n" for r in records)
    r = client.post(f"/v1/benchmarks/{bench}/items", content=body, headers=NDJSON)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def wide_csv(values: np.ndarray, model_names: Sequence[str], item_ids: Sequence[str], *, as_int: bool = True) -> str:
    """A wide score CSV (first column ``model``); NaN cells are empty."""
    def cell(v: float) -> str:
        return "" if np.isnan(v) else str(int(v)) if as_int else repr(float(v))

    lines = ["model," + ",".join(item_ids)]
    lines += [name + "," + ",".join(cell(v) for v in row) for name, row in zip(model_names, values)]
    return "\n".join(lines) + "\n"


def post_scores_csv(client: TestClient, bench: str, text: str, metric: str | None = None) -> Response:
    return client.post(f"/v1/benchmarks/{bench}/scores", content=text.encode(), headers=CSV,
                       params={"metric": metric} if metric else None)


def upload_scores_csv(client: TestClient, bench: str, text: str, metric: str | None = None) -> dict[str, Any]:
    r = post_scores_csv(client, bench, text, metric)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def upload_score_cells(client: TestClient, bench: str, cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Long JSON scores ``[{model, item, score}]``."""
    r = client.post(f"/v1/benchmarks/{bench}/scores", json=cells)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def upload_matrix(client: TestClient, bench: str, values: np.ndarray, model_names: Sequence[str],
                  item_ids: Sequence[str], *, score_kind: str = "binary") -> None:
    """A benchmark with prompted items and a 0/1 (or integer) score matrix, all through the API."""
    create_benchmark(client, bench, score_kind=score_kind)
    upload_items(client, bench, item_ids)
    upload_scores_csv(client, bench, wide_csv(values, model_names, item_ids))


def count_rows(factory: sessionmaker[Session], *models: type) -> int | tuple[int, ...]:
    """Rows of each ORM model (one int for one model)."""
    with factory() as session:
        counts = tuple(int(session.scalar(select(func.count()).select_from(m)) or 0) for m in models)
    return counts[0] if len(counts) == 1 else counts


def empty_all_tables(engine: Engine) -> None:
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
        # the built-in team the migration creates (teams_tokens_ownership) is part of an empty database
        conn.execute(Team.__table__.insert().values(id=LOCAL_TEAM_ID, name="local", created_at=utcnow()))


def wait_for_job(client: TestClient, job_id: str, timeout: float = 60.0) -> dict[str, Any]:
    """Poll ``GET /v1/jobs/{id}`` until a final status; fail loudly on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {body['status']} after {timeout}s: {body}")
        time.sleep(0.05)


class NoJobsDispatcher:
    """For rolled-back tests: a job here means the test should use ``committed_client``."""

    def submit(self, job_id: str, queue: str) -> None:
        raise AssertionError("this test started a job: use the committed_client fixture")


def settings_for(database_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {"database_url": database_url, "redis_url": None, **overrides}
    return Settings(**values)  # type: ignore[arg-type]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def embedded_server(folder: Path, *, env: dict[str, str] | None = None, workers: int = 1, **client_options: Any
                    ) -> Iterator[EvalplanClient]:
    """``evalplan serve`` on an embedded SQLite file in ``folder`` (no Redis: in-process jobs) and a client
    for it once ``/health`` answers (up to 180 s: a loaded machine imports the app slowly); the server is
    stopped after, and the tail of its output printed. ``env``: extra environment of the server;
    ``workers``: uvicorn worker processes."""
    port = free_port()
    server_env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src"), **(env or {}),
                  "EVALPLAN_DATABASE_URL": f"sqlite:///{folder / 'evalplan.db'}", "EVALPLAN_LOG_LEVEL": "WARNING"}
    server_env.pop("EVALPLAN_REDIS_URL", None)
    proc = subprocess.Popen([sys.executable, "-m", "evalplan.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", str(workers)],
                            cwd=folder, env=server_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = EvalplanClient(f"http://127.0.0.1:{port}", **{"timeout": 60, **client_options})
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if client.health() == {"status": "ok"}:
                    break
            except (OSError, EvalplanError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("embedded server did not start") from None
                time.sleep(0.2)
        yield client
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        print(out[-5000:])


def stop_process_group(proc: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """Warm shutdown of a process we started in its own process group (SIGTERM to the group), then SIGKILL if it
    lingers past ``timeout`` seconds; nothing when it has already exited."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
