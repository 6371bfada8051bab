"""POST /v1/imports/inspect, /helm and /lighteval on files written by the real harnesses."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from evalplan.db.models import Benchmark, Item, Score
from evalplan.main import create_app
from evalplan.workers.dispatch import InProcessDispatcher
from support.harness_runs import arith_correct, inspect_log
from support.helpers import assert_problem, count_rows, settings_for, wait_for_job


def post(client, harness: str, paths: list[Path], **data):
    files = [("files", (p.name, p.read_bytes(), "application/octet-stream")) for p in paths]
    return client.post(f"/v1/imports/{harness}", data={k: v for k, v in data.items() if v is not None}, files=files)


def scores_of(client, benchmark: str, model: str, metric: str | None = None) -> dict[str, float]:
    r = client.get(f"/v1/benchmarks/{benchmark}/scores", params={"metric": metric} if metric else None,
                   headers={"accept": "text/csv"})
    assert r.status_code == 200, r.text
    lines = r.text.strip().splitlines()
    header = lines[0].split(",")[1:]
    for line in lines[1:]:
        cells = line.split(",")
        if cells[0] == model:
            return {i: float(c) for i, c in zip(header, cells[1:]) if c != ""}
    raise AssertionError(f"{model} not in {benchmark}")


# ----------------------------------------------------------------------------- inspect_ai

@pytest.mark.slow
def test_inspect_eval_log_imports_every_sample(client, tmp_path):
    log = inspect_log(tmp_path, n=45)
    r = post(client, "inspect", [log])
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["benchmark"] == "arith" and body["model"] == "mockllm/model" and body["metric"] == "match"
    assert (body["n_scores"], body["n_items"], body["n_models"]) == (45, 45, 1)
    assert body["skipped"] == [] and body["averaged_over"] == 1
    assert scores_of(client, "arith", "mockllm/model", "match") == {
        f"q{i}": (1.0 if arith_correct(i) else 0.0) for i in range(45)}
    items = client.get("/v1/benchmarks/arith/items", params={"limit": 100}).json()["items"]
    by_id = {it["id"]: it for it in items}
    assert by_id["q7"]["prompt"] == "What is 7 plus 7?" and by_id["q7"]["target"] == "14"


def test_inspect_epochs_average_and_say_so(client, tmp_path):
    log = inspect_log(tmp_path, n=12, epochs=3, scorers=("match", "includes"))
    r = post(client, "inspect", [log], scorer="includes", model="org/mock-3ep", benchmark="arith-3ep")
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["averaged_over"] == 3 and any("3 epochs" in n for n in body["notes"])
    assert (body["n_scores"], body["metric"], body["model"], body["benchmark"]) == (12, "includes", "org/mock-3ep", "arith-3ep")


def test_inspect_json_log_and_several_models(client, tmp_path):
    first = inspect_log(tmp_path / "a", n=10, log_format="json")
    second = inspect_log(tmp_path / "b", n=10)
    r = client.post("/v1/imports/inspect", files=[
        ("files", (first.name, first.read_bytes(), "application/json")),
        ("files", (second.name, second.read_bytes(), "application/zip"))], data={})
    # the same model twice is refused, nothing stored
    body = assert_problem(r, 422)
    assert "two logs" in body["detail"]
    r = client.post("/v1/imports/inspect", files=[("files", (first.name, first.read_bytes(), "application/json"))],
                    data={"model": "org/json-model"})
    assert r.status_code == 201, r.text
    r = client.post("/v1/imports/inspect", files=[("files", (second.name, second.read_bytes(), "application/zip"))],
                    data={"model": "org/eval-model"})
    assert r.status_code == 201, r.text
    assert r.json()["items_created"] == 0
    assert client.get("/v1/benchmarks/arith").json()["n_models"] == 2


def test_inspect_bad_files_store_nothing(client, db_session_factory, tmp_path):
    log = inspect_log(tmp_path, n=5)
    broken = tmp_path / "broken.eval"
    broken.write_bytes(log.read_bytes()[:200])
    before = count_rows(db_session_factory, Benchmark, Item, Score)
    assert_problem(post(client, "inspect", [log, broken]), 422)
    assert_problem(post(client, "inspect", [log], scorer="no_such_scorer"), 422)
    body = assert_problem(client.post("/v1/imports/inspect", files=[("files", ("x.txt", b"hi", "text/plain"))]), 422)
    assert "x.txt" in body["detail"]
    assert count_rows(db_session_factory, Benchmark, Item, Score) == before
    with zipfile.ZipFile(log) as z:  # a real .eval log is a zip written by inspect_ai
        assert any(n.startswith("samples/") for n in z.namelist())


# ----------------------------------------------------------------------------- HELM

HELM_DATA = Path(__file__).parents[1] / "support" / "data" / "helm"


def helm_files(run: str, *names: str) -> list[Path]:
    return [HELM_DATA / run / n for n in names]


def test_helm_run_imports_exact_match_with_text(client):
    import json

    paths = helm_files("simple_mcqa", "per_instance_stats.json", "scenario_state.json")
    r = post(client, "helm", paths, benchmark="helm-simple-mcqa")
    assert r.status_code == 201, r.text
    body = r.json()
    rows = json.loads(paths[0].read_text())
    expected = {row["instance_id"]: next(s["mean"] for s in row["stats"] if s["name"]["name"] == "exact_match")
                for row in rows}
    assert body["metric"] == "exact_match" and body["model"] == "simple/model1"  # from scenario_state.json
    assert (body["n_scores"], body["n_items"], body["n_models"]) == (len(expected), len(expected), 1)
    assert scores_of(client, "helm-simple-mcqa", "simple/model1", "exact_match") == expected
    state = json.loads(paths[1].read_text())["request_states"][0]["instance"]
    items = {it["id"]: it for it in client.get("/v1/benchmarks/helm-simple-mcqa/items", params={"limit": 100}).json()["items"]}
    assert items[state["id"]]["prompt"] == state["input"]["text"]


def test_helm_train_trials_average_and_stat_choice(client):
    import json
    from collections import defaultdict

    paths = helm_files("simple1", "per_instance_stats.json", "run_spec.json")
    # simple1 computes no exact_match: the default is refused with the stats it has
    body = assert_problem(post(client, "helm", paths, model="simple/model1"), 422)
    assert "num_output_tokens" in body["detail"]
    r = post(client, "helm", paths, model="simple/model1", stat="num_output_tokens")
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["benchmark"] == "simple1"  # from run_spec.json
    values = defaultdict(list)
    for row in json.loads(paths[0].read_text()):
        values[row["instance_id"]].append(next(s["mean"] for s in row["stats"] if s["name"]["name"] == "num_output_tokens"))
    assert body["averaged_over"] == 3 and any("trials" in n for n in body["notes"])
    assert scores_of(client, "simple1", "simple/model1", "num_output_tokens") == {k: sum(v) / len(v) for k, v in values.items()}


def test_helm_needs_model_and_stats_file(client, db_session_factory):
    before = count_rows(db_session_factory, Benchmark, Item, Score)
    assert_problem(post(client, "helm", helm_files("simple_mcqa", "per_instance_stats.json"), benchmark="b"), 422)
    assert_problem(post(client, "helm", helm_files("simple_mcqa", "scenario_state.json"), benchmark="b", model="m"), 422)
    assert count_rows(db_session_factory, Benchmark, Item, Score) == before


# ----------------------------------------------------------------------------- lighteval

@pytest.mark.slow
def test_lighteval_details_split_goes_into_the_id(client, tmp_path):
    from support.harness_runs import lighteval_details

    details, results, expected = lighteval_details(tmp_path, splits={"test": 7})
    # the details alone do not say the split
    body = assert_problem(post(client, "lighteval", [details], model="org/dummy"), 422)
    assert "split" in body["detail"]
    r = post(client, "lighteval", [details], split="test", model="org/dummy", benchmark="le-local")
    assert r.status_code == 201, r.text
    body = r.json()
    assert (body["n_scores"], body["n_items"], body["metric"]) == (7, 7, "acc")
    assert scores_of(client, "le-local", "org/dummy", "acc") == expected


def test_lighteval_several_splits_from_results_json(client, tmp_path):
    import json

    from support.harness_runs import lighteval_details

    details, results, expected = lighteval_details(tmp_path, splits={"validation": 4, "test": 5})
    data = json.loads(results.read_text())
    data["config_tasks"] = {"localarith|0": {"evaluation_splits": ["validation", "test"]}}
    results.write_text(json.dumps(data))
    r = post(client, "lighteval", [details, results])
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["model"] == "org/dummy" and body["benchmark"] == "localarith|0" and body["n_items"] == 9
    assert scores_of(client, "localarith|0", "org/dummy", "acc") == expected


# ----------------------------------------------------------------------------- large files: a job

@pytest.fixture
def small_inline_client(committed_session_factory, database_urls, backend):
    settings = settings_for(database_urls[backend], inline_import_max_bytes=100)
    app = create_app(settings, session_factory=committed_session_factory,
                     dispatcher=InProcessDispatcher(committed_session_factory, threads=2))
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_large_inspect_and_helm_imports_run_as_jobs(small_inline_client, tmp_path):
    log = inspect_log(tmp_path, n=41)
    r = post(small_inline_client, "inspect", [log], model="org/big")
    assert r.status_code == 202, r.text
    job = wait_for_job(small_inline_client, r.json()["job"]["id"])
    assert job["status"] == "succeeded" and job["kind"] == "harness_import", job
    assert (job["result"]["n_scores"], job["result"]["model"], job["result"]["benchmark"]) == (41, "org/big", "arith")
    # a bad file fails the job with the parser's message, storing nothing
    r = post(small_inline_client, "helm", helm_files("simple_mcqa", "per_instance_stats.json"), benchmark="x")
    assert r.status_code == 202
    job = wait_for_job(small_inline_client, r.json()["job"]["id"])
    assert job["status"] == "failed" and "model" in str(job["error"]), job
    assert small_inline_client.get("/v1/benchmarks/x").status_code == 404
