"""A real ``evalplan worker`` (Celery on Redis, PostgreSQL) runs the API's jobs; the CLI's failure modes."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, inspect

from evalplan.db.models import Base
from evalplan.kit.db import make_engine, make_session_factory
from evalplan.kit.settings import Settings
from evalplan.main import create_app
from evalplan.workers.dispatch import CeleryDispatcher
from support.helpers import settings_for as make_test_settings
from support.helpers import stop_process_group, wait_for_job
from support.lm_eval_logs import make_docs, samples_filename, samples_log_bytes, samples_log_records

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT = 90.0


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without any EVALPLAN_* variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALPLAN_")}
    env.update(HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", **extra)
    return env


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "evalplan.cli", *args]


def celery_settings(pg_url: str, redis_url: str, **overrides: object) -> Settings:
    # helpers.settings_for pins redis_url=None; production mode differs by that one setting.
    return make_test_settings(pg_url, **overrides).model_copy(update={"redis_url": redis_url})


@pytest.mark.worker
def test_real_worker_runs_stats_and_large_import(pg_engine: Engine, redis_db: str, database_urls: dict[str, str],
                                                 tmp_path: Path) -> None:
    pg_url = database_urls["postgresql"]
    factory = make_session_factory(pg_engine)
    log_path = tmp_path / "worker.log"
    env = clean_env(EVALPLAN_DATABASE_URL=pg_url, EVALPLAN_REDIS_URL=redis_db, EVALPLAN_LOG_LEVEL="INFO")
    started = time.monotonic()
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(cli("worker", "--queues", "cpu", "--concurrency", "1"), cwd=ROOT, env=env,
                                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    ok = False
    try:
        # --- score statistics, computed by the worker
        app = create_app(celery_settings(pg_url, redis_db), session_factory=factory)
        assert isinstance(app.state.dispatcher, CeleryDispatcher)
        with TestClient(app, raise_server_exceptions=False) as client:
            assert client.post("/v1/benchmarks", json={"name": "worker-bench"}).status_code == 201
            r = client.post("/v1/benchmarks/worker-bench/scores",
                            content=b"model,q1,q2,q3,q4\nm1,1,0,1,1\nm2,0,0,1,\nm3,1,0,1,0\nm4,1,0,1,1\n",
                            headers={"content-type": "text/csv"})
            assert r.status_code == 200, r.text
            r = client.get("/v1/benchmarks/worker-bench/stats")
            assert r.status_code == 202, r.text
            job_id = r.json()["job"]["id"]
            job = wait_for_job(client, job_id, timeout=JOB_TIMEOUT)
            assert proc.poll() is None, "the worker exited"
            assert job["status"] == "succeeded", job
            assert job["kind"] == "score_stats" and job["attempts"] == 1 and job["progress"] == 1.0
            result = job["result"]
            assert result["benchmark"] == "worker-bench"
            assert (result["n_models"], result["n_items"], result["n_scores"]) == (4, 4, 15)
            assert result["mean"] == pytest.approx(9 / 15)
            assert result["missing_fraction"] == pytest.approx(1 / 16)
            assert [m["mean"] for m in result["models"]] == pytest.approx([0.75, 1 / 3, 0.5, 0.75])
            assert [c["item"] for c in result["constant_items"]] == ["q2", "q3"]
            assert result["duplicate_models"] == [["m1", "m4"]]
            assert client.get("/v1/benchmarks/worker-bench/stats").json() == result

        # --- a large lm-eval import, parsed and stored by the worker
        docs = make_docs(60, seed=13)
        content = samples_log_bytes("arc_worker", docs, seed=14)
        app = create_app(celery_settings(pg_url, redis_db, inline_import_max_bytes=100), session_factory=factory)
        with TestClient(app, raise_server_exceptions=False) as client:
            r = client.post("/v1/imports/lm-eval", data={"model": "worker-model", "metric": "acc_norm"},
                            files=[("files", (samples_filename("arc_worker"), content, "application/jsonl"))])
            assert r.status_code == 202, r.text
            job = wait_for_job(client, r.json()["job"]["id"], timeout=JOB_TIMEOUT)
            assert job["status"] == "succeeded", job
            summary = job["result"]["benchmarks"][0]
            assert (summary["benchmark"], summary["metric"], summary["n_items"], summary["n_scores"]) == (
                "arc_worker", "acc_norm", 60, 60)
            r = client.get("/v1/benchmarks/arc_worker/scores", params={"metric": "acc_norm"})
            rows = list(csv.reader(io.StringIO(r.text)))
            assert rows[0] == ["model", *[str(i) for i in range(60)]]
            expected = {str(rec["doc_id"]): float(rec["acc_norm"])
                        for rec in samples_log_records("arc_worker", docs, seed=14)}
            assert rows[1][0] == "worker-model"
            assert dict(zip(rows[0][1:], map(float, rows[1][1:]), strict=True)) == expected

            # A bad large import fails in the worker, naming the row.
            lines = content.splitlines(keepends=True)
            lines[41] = b"{oops\n"
            r = client.post("/v1/imports/lm-eval", data={"model": "worker-bad"},
                            files=[("files", (samples_filename("arc_worker"), b"".join(lines), "application/jsonl"))])
            assert r.status_code == 202, r.text
            job = wait_for_job(client, r.json()["job"]["id"], timeout=JOB_TIMEOUT)
            assert job["status"] == "failed", job
            assert job["error"]["errors"][0]["row"] == 42
            assert client.get("/v1/models/worker-bad").status_code == 404
        ok = True
    finally:
        stop_process_group(proc)
        output = log_path.read_text(errors="replace")
        print(f"--- worker output ({time.monotonic() - started:.1f}s) ---\n{output}")
    assert ok
    # All three jobs went through the Celery worker (the stats job, the good and the bad import).
    assert output.count("Task evalplan.run_job[") >= 3
    assert output.count("] succeeded in") == 3


def test_worker_without_redis_url_exits_2(tmp_path: Path) -> None:
    env = clean_env(EVALPLAN_DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}")
    done = subprocess.run(cli("worker", "--queues", "cpu"), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "EVALPLAN_REDIS_URL" in done.stderr
    assert "Traceback" not in done.stderr

    env["EVALPLAN_REDIS_URL"] = "redis://127.0.0.1:6379/15"
    done = subprocess.run(cli("worker", "--queues", "cpu,tpu"), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "tpu" in done.stderr


@pytest.mark.slow
def test_db_upgrade_on_a_fresh_sqlite_file(tmp_path: Path) -> None:
    db_file = tmp_path / "fresh.db"
    env = clean_env(EVALPLAN_DATABASE_URL=f"sqlite:///{db_file}")
    for _ in range(2):  # idempotent
        done = subprocess.run(cli("db", "upgrade"), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "database at revision head" in done.stdout
    assert db_file.exists()
    engine = make_engine(f"sqlite:///{db_file}")
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert tables == set(Base.metadata.tables) | {"alembic_version"}


def test_unreachable_broker_fails_the_job_with_503(pg_engine: Engine, database_urls: dict[str, str]) -> None:
    closed = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    app = create_app(celery_settings(database_urls["postgresql"], closed), session_factory=make_session_factory(pg_engine))
    assert isinstance(app.state.dispatcher, CeleryDispatcher)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.post("/v1/benchmarks", json={"name": "no-broker"}).status_code == 201
        r = client.post("/v1/benchmarks/no-broker/scores", content=b"model,a,b\nm1,1,0\n",
                        headers={"content-type": "text/csv"})
        assert r.status_code == 200, r.text
        started = time.monotonic()
        r = client.get("/v1/benchmarks/no-broker/stats")
        assert time.monotonic() - started < 30
        assert r.status_code == 503, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        job_id = r.json()["errors"][0]["job"]
        job = client.get(f"/v1/jobs/{job_id}").json()
        assert job["status"] == "failed"  # not left queued forever
        assert job["error"]["status"] == 503
        assert "could not enqueue" in job["error"]["detail"]
        # Asking again makes a new job (the failed one is not reused) and fails the same way.
        r = client.get("/v1/benchmarks/no-broker/stats")
        assert r.status_code == 503
        assert r.json()["errors"][0]["job"] != job_id
        assert [j["status"] for j in client.get("/v1/jobs").json()["items"]] == ["failed", "failed"]
