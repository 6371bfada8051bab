"""The standard-library CI client and the ``evalplan session`` CLI against a real ``evalplan serve``
(embedded SQLite in a temporary folder), driven to the stopping rule with ``run_session``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from evalplan.client import EvalplanClient, EvalplanError, run_session
from support.helpers import embedded_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EvalplanClient]:
    with embedded_server(tmp_path) as client:
        yield client


def upload_benchmark(client: EvalplanClient, name: str = "ci-bench") -> dict[str, float]:
    rng = np.random.default_rng(7)
    n_items, n_refs = 80, 6
    difficulty = rng.normal(0, 1, n_items)
    ability = np.linspace(-1, 1, n_refs)
    refs = (rng.random((n_refs, n_items)) < 1 / (1 + np.exp(-(ability[:, None] - difficulty)))).astype(float)
    target = (rng.random(n_items) < 1 / (1 + np.exp(-(0.2 - difficulty)))).astype(float)
    items = [f"item-{j}" for j in range(n_items)]
    client.request("POST", "/v1/benchmarks", {"name": name, "score_kind": "binary"})
    cells = [{"model": f"ref-{i}", "item": items[j], "score": refs[i, j]} for i in range(n_refs) for j in range(n_items)]
    client.request("POST", f"/v1/benchmarks/{name}/scores", cells)
    return dict(zip(items, target.tolist()))


@pytest.mark.slow
def test_run_session_reaches_the_stopping_rule(server: EvalplanClient) -> None:
    truth = upload_benchmark(server)
    asked: list[str] = []

    def score_fn(item_id: str) -> float:
        asked.append(item_id)
        return truth[item_id]

    final = run_session(server, "ci-bench", "ckpt-1", score_fn, max_items=40)
    assert final["status"] == "stopped" and final["stop_reason"] in ("converged", "max_items")
    assert final["n_observed"] == len(asked) == len(set(asked)) <= 40
    assert final["ci"][0] <= final["estimate"] <= final["ci"][1]
    assert server.get_session(final["id"]) == final
    assert len(server.trajectory(final["id"])) == final["n_observed"]

    batched = run_session(server, "ci-bench", "ckpt-2", lambda i: truth[i], batch_size=4, max_items=20)
    assert batched["status"] == "stopped" and batched["n_observed"] <= 20

    with pytest.raises(EvalplanError) as err:
        server.observe(final["id"], next(i for i in truth if i not in asked), 1.0)
    assert err.value.status == 409 and err.value.problem["status"] == 409

    compared = server.compare_sessions([final["id"], batched["id"]], level=0.9)
    assert compared["level"] == 0.9 and [s["id"] for s in compared["sessions"]] == [final["id"], batched["id"]]
    pair = compared["pairs"][0]
    assert pair["a"] == final["id"] and (pair["paired"] is None) == (pair["n_common"] == 0)
    board = server.leaderboard(["ci-bench"])
    assert {row["model"] for row in board["items"]} >= {"ref-0", "ckpt-1"}
    with pytest.raises(EvalplanError) as err:
        server.compare_sessions([final["id"]])
    assert err.value.status == 422


@pytest.mark.slow
def test_cli_session_commands(server: EvalplanClient) -> None:
    truth = upload_benchmark(server, "cli-bench")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "evalplan.cli", "session", "--url", server.base_url, *args],
                              capture_output=True, text=True, env=env, timeout=60)

    created = cli("create", "--benchmark", "cli-bench", "--target", "ckpt-cli", "--max-items", "3")
    assert created.returncode == 0, created.stderr
    session = json.loads(created.stdout)
    assert session["status"] == "active" and session["next_items"]
    while session["status"] == "active":
        item = session["next_items"][0]
        observed = cli("observe", session["id"], item, str(truth[item]))
        assert observed.returncode == 0, observed.stderr
        session = json.loads(observed.stdout)
    assert session["stop_reason"] == "max_items" and session["n_observed"] == 3
    shown = cli("show", session["id"])
    assert shown.returncode == 0 and json.loads(shown.stdout) == session
    missing = cli("show", "ss_000000000000000000000000")
    assert missing.returncode == 1 and "404" in missing.stderr

    # `evalplan session show ... | head`: the reader is gone before the output is written; no traceback
    reader_gone = subprocess.Popen([sys.executable, "-m", "evalplan.cli", "session", "--url", server.base_url,
                                    "show", session["id"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert reader_gone.stdout is not None and reader_gone.stderr is not None
    reader_gone.stdout.close()
    err = reader_gone.stderr.read().decode()
    assert reader_gone.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


@pytest.mark.slow
def test_item_responses_after_an_lm_eval_import(server: EvalplanClient) -> None:
    example = ROOT / "examples" / "lm-eval" / "samples_arc_easy_2024-06-26T12-00-00.123456.jsonl"
    server.import_lm_eval("org/arc-model", [example])
    record = json.loads(example.read_text().splitlines()[0])
    page = server.item_responses("arc_easy", str(record["doc_id"]))
    (entry,) = page["items"]
    assert entry["model"] == "org/arc-model" and entry["source"] == "lm_eval" and entry["response"]
    assert server.item_responses("arc_easy", str(record["doc_id"]), model="org/arc-model")["items"] == [entry]
    with pytest.raises(EvalplanError) as err:
        server.item_responses("arc_easy", "no-such-item")
    assert err.value.status == 404
