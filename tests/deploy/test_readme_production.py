"""The README's Production block, as written, on PostgreSQL and Redis: ``evalplan db upgrade`` on a fresh
database, then ``evalplan serve`` and the ``cpu`` and ``gpu`` workers in the background; the API answers ready
(database, broker, workers) and a job runs through a Celery worker.

Changed for the test, each asserted present: the database name (``evalplan_readme_<pid>``, created and dropped
here), the Redis db (the suite's, flushed), the port (a free one). Left out: the ``pip install`` line, whose
``pip install -c constraints.txt .`` tests/deploy/test_base_install.py runs into a clean venv (installing torch
first is what ``./dev.sh`` does for the venv these commands come from); this runs the venv's ``evalplan``.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import make_url, select, text

from evalplan.db.models import Worker
from evalplan.kit.db import make_engine, make_session_factory
from support.helpers import free_port, stop_process_group
from support.readme import code_blocks, script_env, section
from support.service_bringup import Services

pytestmark = pytest.mark.slow

DATABASE = f"evalplan_readme_{os.getpid()}"
README_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/evalplan"
README_REDIS_URL = "redis://127.0.0.1:6379/0"


def production_block() -> str:
    blocks = [block for lang, block in code_blocks(section("Production")) if lang == "bash"]
    assert len(blocks) == 1, blocks
    return blocks[0]


def admin_execute(admin_url: str, statement: str) -> None:
    engine = make_engine(admin_url).execution_options(isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(statement))
    engine.dispose()


@pytest.fixture
def database_url(services: Services) -> Iterator[str]:
    admin_execute(services.admin_pg_url, f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    admin_execute(services.admin_pg_url, f"CREATE DATABASE {DATABASE}")
    yield make_url(services.admin_pg_url).set(database=DATABASE).render_as_string(hide_password=False)
    admin_execute(services.admin_pg_url, f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")


def as_run_here(block: str, database_url: str, redis_url: str, port: int) -> str:
    lines = block.splitlines(keepends=True)
    assert lines[0] == "pip install -c constraints.txt torch==2.13.0 && pip install -c constraints.txt .\n"
    script = "".join(lines[1:])
    for shown, here in ((f"EVALPLAN_DATABASE_URL={README_DATABASE_URL}\n", f"EVALPLAN_DATABASE_URL={database_url}\n"),
                        (f"EVALPLAN_REDIS_URL={README_REDIS_URL}\n", f"EVALPLAN_REDIS_URL={redis_url}\n"),
                        (" --port 8000 ", f" --port {port} ")):
        assert script.count(shown) == 1, shown
        script = script.replace(shown, here)
    return script


def wait_until_ready(proc: subprocess.Popen[bytes], url: str, timeout: float = 240) -> dict:
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the block's shell exited"
        try:
            r = httpx.get(f"{url}/health/ready", timeout=5)
            last = r.json()
            if r.status_code == 200:
                return last
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"not ready after {timeout} s: {last}")


def test_production_block_runs_on_postgresql_and_redis(database_url: str, redis_db: str, tmp_path: Path) -> None:
    port = free_port()
    script = "set -euo pipefail\n" + as_run_here(production_block(), database_url, redis_db, port) + "wait\n"
    env = {k: v for k, v in script_env(PYTHONUNBUFFERED="1").items() if not k.startswith("EVALPLAN_")}
    log_path = tmp_path / "block.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # its own process group: the server and both workers
    engine = make_engine(database_url)
    ok = False
    try:
        url = f"http://127.0.0.1:{port}"
        ready = wait_until_ready(proc, url)  # production mode: a broker and workers, not "not used"
        assert ready == {"status": "ok", "database": "ok", "broker": "ok", "workers": "ok"}, ready
        # both workers heartbeat, one per queue
        deadline = time.monotonic() + 120
        while True:
            with make_session_factory(engine)() as session:
                queues = sorted(tuple(w.queues) for w in session.scalars(select(Worker).where(Worker.kind == "celery")))
            if queues == [("cpu",), ("gpu",)] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert queues == [("cpu",), ("gpu",)], queues
        # a job, through the API and a Celery worker
        with httpx.Client(base_url=url, timeout=30) as http:
            assert http.post("/v1/benchmarks", json={"name": "prod", "score_kind": "binary"}).status_code == 201
            r = http.post("/v1/benchmarks/prod/scores", content=b"model,q1,q2,q3\nm1,1,0,1\nm2,0,0,1\n",
                          headers={"content-type": "text/csv"})
            assert r.status_code == 200, r.text
            r = http.get("/v1/benchmarks/prod/stats")
            assert r.status_code == 202, r.text  # a job: the API does not compute it
            job_id = r.json()["job"]["id"]
            deadline = time.monotonic() + 120
            while (job := http.get(f"/v1/jobs/{job_id}").json())["status"] in ("queued", "running"):
                assert time.monotonic() < deadline, job
                time.sleep(0.3)
            assert job["status"] == "succeeded" and job["queue"] == "cpu", job
            assert job["result"]["n_scores"] == 6
        ok = True
    finally:
        stop_process_group(proc, timeout=60)
        engine.dispose()
        output = log_path.read_text(errors="replace")
        if not ok:
            print(output[-6000:])
    assert "Task evalplan.run_job[" in output and "succeeded in" in output  # the Celery worker ran it
