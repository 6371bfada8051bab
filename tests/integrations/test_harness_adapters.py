"""The harness adapters end to end against a real ``evalplan serve`` (embedded SQLite): the inspect_ai
``SampleSource`` (a real inspect eval with ``mockllm``) and ``evalplan run lm-eval`` (lm-eval's dummy model
on a local task), plus the shared client's idempotent retries and uploads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from evalplan.client import EvalplanClient, EvalplanError
from support.harness_runs import LM_EVAL_TASK, arith_correct, arith_samples, inspect_log, lm_eval_task_dir, mock_model
from support.helpers import embedded_server

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src")}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvalplanClient]:
    with embedded_server(tmp_path_factory.mktemp("server"), env={"HF_DATASETS_OFFLINE": "1"}, retries=0) as client:
        yield client


def reference_scores(client: EvalplanClient, benchmark: str, item_ids: list[str], n_refs: int = 6) -> None:
    rng = np.random.default_rng(11)
    difficulty = rng.normal(0, 1, len(item_ids))
    cells = [{"model": f"ref-{m}", "item": item, "score": float(rng.random() < 1 / (1 + np.exp(difficulty[j] - m / 3)))}
             for m in range(n_refs) for j, item in enumerate(item_ids)]
    client.upload_scores(benchmark, cells)


# ----------------------------------------------------------------------------- inspect_ai SampleSource

@pytest.mark.slow
def test_inspect_sample_source_runs_exactly_the_session(server: EvalplanClient, tmp_path: Path) -> None:
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import read_eval_log
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    from evalplan.integrations.inspect import evalplan_source

    n = 45
    server.create_benchmark("arith-src", score_kind="binary")
    reference_scores(server, "arith-src", [f"q{i}" for i in range(n)])
    source = evalplan_source(arith_samples(n), url=server.base_url, benchmark="arith-src", target="mockllm/model",
                             max_items=18, batch_size=3, seed=3)
    task = Task(name="arith", dataset=source, metadata=source.metadata, solver=generate(), scorer=match())
    log = inspect_eval(task, model=mock_model(), log_dir=str(tmp_path), display="none")[0]
    assert log.status == "success"
    log = read_eval_log(log.location)
    session = server.get_session(source.session["id"])
    # exactly the proposed samples ran, and the session stopped
    assert len(log.samples) == session["n_observed"] == 18
    assert session["status"] == "stopped" and session["stop_reason"] == "max_items"
    # the posted scores are the log's
    log_scores = {str(s.id): (1.0 if s.scores["match"].value == "C" else 0.0) for s in log.samples}
    posted = {o["item"]: o["score"] for o in server.observations(session["id"], limit=100)["items"]}
    assert posted == log_scores
    assert all(v == (1.0 if arith_correct(int(k[1:])) else 0.0) for k, v in posted.items())
    # the log's metadata holds the final session
    meta = log.eval.metadata["evalplan"]
    assert meta["session_id"] == session["id"] and meta["n_observed"] == 18
    assert meta["estimate"] == pytest.approx(session["estimate"]) and meta["ci"] == pytest.approx(session["ci"])
    assert meta["stop_reason"] == "max_items"


# ----------------------------------------------------------------------------- evalplan run lm-eval

def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evalplan.cli", "run", "lm-eval", *args], capture_output=True, text=True,
                          env=ENV, timeout=timeout)


def read_samples(folder: Path) -> list[dict]:
    files = list(folder.glob(f"**/samples_{LM_EVAL_TASK}_*.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


@pytest.mark.slow
def test_run_lm_eval_session_and_coreset(server: EvalplanClient, tmp_path: Path) -> None:
    tasks = lm_eval_task_dir(tmp_path / "tasks")
    # references: full real lm-eval runs of the dummy model, imported from lm-eval's own samples files
    from evalplan.integrations.lm_eval_runner import LmEvalRunner

    for ref in range(3):
        out = tmp_path / f"ref{ref}"
        runner = LmEvalRunner("dummy", include_path=str(tasks), output_path=str(out))
        runner.evaluate(LM_EVAL_TASK, range(48))
        files = list(out.glob("**/samples_*.jsonl"))
        summary = server.import_lm_eval(f"dummy-ref-{ref}", files)
        assert summary["benchmarks"][0]["n_items"] == 48
    out = tmp_path / "run"
    done = run_cli("--tasks", LM_EVAL_TASK, "--model", "dummy", "--target", "dummy-ckpt", "--max-items", "12",
                   "--batch-size", "4", "--include-path", str(tasks), "--output-path", str(out), "--url", server.base_url)
    assert done.returncode == 0, done.stderr[-3000:]
    final = json.loads(done.stdout)
    assert final["status"] == "stopped" and final["stop_reason"] == "max_items"
    assert final["lm_eval_calls"] == 3  # one simple_evaluate per batch, the model loaded once
    assert "evalplan evalplan_arith" in done.stderr and "estimate=" in done.stderr  # the progress bar
    samples = read_samples(out)
    assert len(samples) == final["n_observed"] == 12
    logged = {str(s["doc_id"]): float(s["acc"]) for s in samples}
    posted = {o["item"]: o["score"] for o in server.observations(final["id"], limit=100)["items"]}
    assert posted == logged

    # --coreset: a static coreset's doc ids evaluated once, its predicted full score printed
    created = server.create_coreset("random", [LM_EVAL_TASK], 8, reference_models="all", seed=1)
    server.wait_job(created["job"]["id"], timeout=300)
    done = run_cli("--tasks", LM_EVAL_TASK, "--model", "dummy", "--coreset", created["coreset"]["id"],
                   "--include-path", str(tasks), "--url", server.base_url)
    assert done.returncode == 0, done.stderr[-3000:]
    prediction = json.loads(done.stdout)
    bench = prediction["benchmarks"][LM_EVAL_TASK]
    assert 0.0 <= bench["estimate"] <= 1.0 and bench["interval"][0] <= bench["estimate"] <= bench["interval"][1]


# ----------------------------------------------------------------------------- the shared client

def test_client_retries_writes_under_one_idempotency_key(server: EvalplanClient, tmp_path: Path) -> None:
    body = {"name": "idem-bench", "score_kind": "binary"}
    first = server.transport.call("POST", "/v1/benchmarks", json_body=body, idempotency_key="k-idem-1")
    again = server.transport.call("POST", "/v1/benchmarks", json_body=body, idempotency_key="k-idem-1")
    assert again == first  # replayed, not a 409 "already exists"
    with pytest.raises(EvalplanError) as err:
        server.create_benchmark("idem-bench")  # a fresh key: the real conflict
    assert err.value.status == 409
    # uploads through the client: an inspect log written by inspect_ai
    log = inspect_log(tmp_path, n=10, task="arith-client")
    summary = server.import_inspect([log], model="org/client")
    assert summary["n_scores"] == 10 and summary["benchmark"] == "arith-client"
    assert server.get_benchmark("arith-client")["n_items"] == 10


def test_client_sends_the_token() -> None:
    client = EvalplanClient("http://127.0.0.1:9", token="tok-123", retries=0)
    assert client.transport.token == "tok-123"
    os.environ["EVALPLAN_TOKEN"] = "tok-env"
    try:
        assert EvalplanClient("http://127.0.0.1:9").transport.token == "tok-env"
    finally:
        del os.environ["EVALPLAN_TOKEN"]


# ----------------------------------------------------------------------------- tracking sinks

def small_session(server: EvalplanClient, name: str) -> dict:
    from evalplan.client import run_session

    items = [f"s{i}" for i in range(30)]
    server.create_benchmark(name, score_kind="binary")
    reference_scores(server, name, items, n_refs=5)
    return run_session(server, name, "org/tracked", lambda item: float(int(item[1:]) % 2), max_items=10, seed=1)


@pytest.mark.slow
def test_mlflow_sink_logs_the_trajectory_and_predictions(server: EvalplanClient, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    from evalplan.integrations.tracking import log_prediction_mlflow, log_session_mlflow

    session = small_session(server, "tracked-mlflow")
    # MLflow >= 3.7 refuses a file store without MLFLOW_ALLOW_FILE_STORE; the sink works without it set
    os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)
    uri = (tmp_path / "mlruns").as_uri()
    run_id = log_session_mlflow(server, session["id"], tracking_uri=uri, experiment="evalplan-test")
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ  # restored
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # for this test's own reading client
    mlflow = MlflowClient(uri)
    run = mlflow.get_run(run_id)
    assert run.data.params["evalplan.id"] == session["id"] and run.data.tags["evalplan.stop_reason"] == "max_items"
    history = mlflow.get_metric_history(run_id, "tracked-mlflow/estimate")
    trajectory = server.trajectory(session["id"])
    assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [
        (row["n"], pytest.approx(row["estimate"])) for row in trajectory]
    upper = {m.step: m.value for m in mlflow.get_metric_history(run_id, "tracked-mlflow/ci_upper")}
    assert upper[trajectory[-1]["n"]] == pytest.approx(trajectory[-1]["ci"][1])
    prediction = {"benchmarks": {"b1": {"estimate": 0.5, "interval": [0.4, 0.6]}},
                  "overall": {"estimate": 0.5, "interval": [0.4, 0.6]}, "extrapolation": False}
    pred_run = log_prediction_mlflow(prediction, coreset="cs_1", model="m", tracking_uri=uri, experiment="evalplan-test")
    metrics = mlflow.get_run(pred_run).data.metrics
    assert metrics["b1/estimate"] == 0.5 and metrics["overall/ci_half_width"] == pytest.approx(0.1)
    os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)


@pytest.mark.slow
def test_wandb_sink_offline(server: EvalplanClient, tmp_path: Path) -> None:
    from evalplan.integrations.tracking import log_session_wandb

    session = small_session(server, "tracked-wandb")
    os.environ["WANDB_SILENT"] = "true"
    run_id = log_session_wandb(server, session["id"], project="evalplan-test", mode="offline", directory=str(tmp_path))
    runs = list((tmp_path / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(runs) == 1
    # wandb >= 0.2x writes offline runs as a protobuf transaction log through its Go core, with no Python
    # reader; keys and JSON values are stored as plain strings, so the log must hold every logged row
    trajectory = server.trajectory(session["id"])
    deadline = time.monotonic() + 60  # wandb-core (its own process) flushes the log after finish() returns
    while True:
        log = (runs[0] / f"run-{run_id}.wandb").read_bytes()
        if b"evalplan.stop_reason" in log or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert log.count(b"tracked-wandb/estimate") >= len(trajectory)
    assert json.dumps(trajectory[-1]["estimate"]).encode()[:12] in log
    assert b"evalplan.stop_reason" in log and b"max_items" in log
