"""Model responses (issue 26 item 3): every harness import stores what the model answered on each item, the
API lists them (``GET /v1/benchmarks/{b}/items/{item}/responses``), a re-import replaces them, and they go with
their model, item, benchmark and team. Real files: lm-eval samples logs (the example under examples/ and the
test generator's), an inspect_ai log written by inspect_ai with its mockllm model, HELM's own run files and
lighteval's own details parquet. SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import Benchmark, Item, Model, ModelResponse
from evalplan.integrations.harness_records import MAX_RESPONSE_CHARS
from evalplan.integrations.harness_records import response_of as response_of_record
from support.harness_runs import (
    LM_EVAL_GEN_TASK,
    LM_EVAL_TASK,
    arith_correct,
    inspect_log,
    lighteval_details,
    lighteval_generative_details,
    lm_eval_generation_task_dir,
)
from support.helpers import assert_problem, count_rows
from support.lm_eval_logs import make_docs, records_to_bytes, samples_filename, samples_log_records
from support.teams import (
    Teams,
    no_jobs_teams,  # noqa: F401 (the teams fixture)
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "lm-eval" / "samples_arc_easy_2024-06-26T12-00-00.123456.jsonl"
HELM_DATA = Path(__file__).parents[1] / "support" / "data" / "helm"


def post_lm_eval(client: TestClient, model: str, files: list[tuple[str, bytes]], **data: str):
    return client.post("/v1/imports/lm-eval", data={"model": model, **data},
                       files=[("files", (name, content, "application/jsonl")) for name, content in files])


def post_harness(client: TestClient, harness: str, paths: list[Path], **data: str):
    files = [("files", (p.name, p.read_bytes(), "application/octet-stream")) for p in paths]
    return client.post(f"/v1/imports/{harness}", data=data, files=files)


def responses(client: TestClient, benchmark: str, item: str, **params: Any) -> list[dict[str, Any]]:
    r = client.get(f"/v1/benchmarks/{benchmark}/items/{item}/responses", params=params)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["item"] == item.replace("%2F", "/") and body["next_cursor"] is None
    return list(body["items"])


def response_of(client: TestClient, benchmark: str, item: str, model: str) -> dict[str, Any]:
    (found,) = responses(client, benchmark, item, model=model)
    assert found["model"] == model
    return found


def generation_records(task: str, n: int, seed: int, **kwargs: Any) -> list[dict[str, Any]]:
    return samples_log_records(task, make_docs(n, seed=seed), kind="generate_until", seed=seed, **kwargs)


@pytest.fixture(scope="module")
def inspect_eval(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real inspect_ai run (mockllm, 9 samples, 2 epochs) shared by the module's tests."""
    return inspect_log(tmp_path_factory.mktemp("inspect"), n=9, epochs=2, task="arith-resp")


# ----------------------------------------------------------------------------- lm-eval

def test_lm_eval_multiple_choice_response_is_the_likeliest_choice(client: TestClient) -> None:
    r = post_lm_eval(client, "org/arc-model", [(EXAMPLE.name, EXAMPLE.read_bytes())])
    assert r.status_code == 201, r.text
    assert r.json()["n_responses"] == 20 and r.json()["benchmarks"][0]["n_responses"] == 20
    for line in EXAMPLE.read_text().splitlines()[:5]:
        record = json.loads(line)
        lls = [float(pair[0]) for pair in record["filtered_resps"]]
        best = lls.index(max(lls))
        got = response_of(client, "arc_easy", str(record["doc_id"]), "org/arc-model")
        assert got["response"] == record["arguments"][f"gen_args_{best}"]["arg_1"]  # the continuation acc scores
        assert (best == record["doc"]["answer"]) == (record["acc"] == 1.0)
        assert got["extra"] == {"filter": "none", "kind": "loglikelihood", "choice": best, "loglikelihoods": lls}
        assert got["source"] == "lm_eval" and got["truncated"] is False and got["n_chars"] == len(got["response"])


def test_lm_eval_generation_keeps_raw_and_filtered_answer(client: TestClient) -> None:
    records = generation_records("gen_task", 12, seed=5, filters=("none", "strict-match"))
    r = post_lm_eval(client, "org/gen", [(samples_filename("gen_task"), records_to_bytes(records))],
                     filter="strict-match")
    assert r.status_code == 201, r.text
    assert r.json()["n_responses"] == 12
    for record in records:
        if record["filter"] != "strict-match":
            continue
        got = response_of(client, "gen_task", str(record["doc_id"]), "org/gen")
        assert got["response"] == record["resps"][0][0]  # the raw generation
        filtered = record["filtered_resps"][0]
        assert got["extra"] == ({"filter": "strict-match", "filtered": filtered} if filtered != got["response"]
                                else {"filter": "strict-match"})


def test_reimport_replaces_and_an_item_without_response_loses_it(client: TestClient,
                                                                 db_session_factory: sessionmaker[Session]) -> None:
    first = generation_records("regen", 6, seed=1)
    r = post_lm_eval(client, "org/re", [(samples_filename("regen"), records_to_bytes(first))])
    assert r.status_code == 201, r.text
    before = response_of(client, "regen", "2", "org/re")
    second = generation_records("regen", 6, seed=2)
    for record in second:
        record["resps"] = [[f"answer {record['doc_id']} of the second run"]]
    del second[3]["resps"], second[3]["filtered_resps"]  # this line logs no response
    r = post_lm_eval(client, "org/re", [(samples_filename("regen"), records_to_bytes(second))])
    assert r.status_code == 201, r.text
    assert r.json()["n_responses"] == 5
    after = response_of(client, "regen", "2", "org/re")
    assert after["response"] == "answer 2 of the second run" and after["created_at"] == before["created_at"]
    assert responses(client, "regen", "3") == []  # replaced by nothing: its old response went with its old score
    with db_session_factory() as s:
        assert s.scalar(select(func.count()).select_from(ModelResponse)) == 5


def test_long_responses_are_truncated(client: TestClient) -> None:
    records = generation_records("longgen", 3, seed=3)
    records[0]["resps"] = [["x" * (MAX_RESPONSE_CHARS + 5000)]]
    r = post_lm_eval(client, "org/long", [(samples_filename("longgen"), records_to_bytes(records))])
    assert r.status_code == 201, r.text
    long = response_of(client, "longgen", "0", "org/long")
    assert long["truncated"] is True and long["n_chars"] == MAX_RESPONSE_CHARS + 5000
    assert long["response"] == "x" * MAX_RESPONSE_CHARS
    assert response_of(client, "longgen", "1", "org/long")["truncated"] is False


def test_response_records_are_storable_on_every_backend() -> None:
    # lm-eval lines with NUL are refused by the JSON guard; the binary logs (inspect) may carry one
    made = response_of_record("a\x00b" * 3, {"explanation": "c\x00d", "lls": [float("nan"), 1.0] * 80,
                                              "empty": None, "deep": {"a": {"b": {"c": {"d": {"e": 1}}}}}})
    assert made.text == "a\ufffdb" * 3 and made.n_chars == 9 and not made.truncated
    assert made.extra is not None and made.extra["explanation"] == "c\ufffdd" and "empty" not in made.extra
    assert made.extra["lls"][:2] == [None, 1.0] and len(made.extra["lls"]) == 100
    assert made.extra["deep"] == {"a": {"b": {"c": '{"d": {"e": 1}}'}}}
    huge = response_of_record("ok", {f"k{i}": "y" * 1500 for i in range(30)})
    assert huge.extra is not None and list(huge.extra) == ["omitted"]


def test_a_refused_import_stores_no_response(client: TestClient, db_session_factory: sessionmaker[Session]) -> None:
    r = client.post("/v1/benchmarks", json={"name": "other", "score_kind": "binary"})
    assert r.status_code == 201, r.text
    assert client.post("/v1/benchmarks/other/items", json=[{"id": "x1", "prompt": "p"}]).status_code == 200
    good = (samples_filename("fine"), records_to_bytes(generation_records("fine", 4, seed=1)))
    foreign = (samples_filename("other"), records_to_bytes(generation_records("other", 4, seed=2)))
    assert_problem(post_lm_eval(client, "org/partial", [good, foreign]), 409)  # the second task's items are foreign
    assert count_rows(db_session_factory, ModelResponse) == 0
    assert client.get("/v1/benchmarks/fine").status_code == 404


def test_unknown_item_or_model_is_404(client: TestClient) -> None:
    assert post_lm_eval(client, "org/m", [(EXAMPLE.name, EXAMPLE.read_bytes())]).status_code == 201
    body = assert_problem(client.get("/v1/benchmarks/arc_easy/items/999/responses"), 404)
    assert "999" in body["detail"]
    assert_problem(client.get("/v1/benchmarks/arc_easy/items/1/responses", params={"model": "nobody"}), 404)
    assert_problem(client.get("/v1/benchmarks/nope/items/1/responses"), 404)
    assert responses(client, "arc_easy", "1", limit=1)[0]["model"] == "org/m"
    model_id = client.get("/v1/models/org/m").json()["id"]
    assert responses(client, "arc_easy", "1", model=model_id)[0]["model_id"] == model_id


@pytest.fixture(scope="module")
def lm_eval_run(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The samples files of one real lm-eval run of its ``dummy`` model on a generation and a choice task."""
    from evalplan.integrations.lm_eval_runner import LmEvalRunner

    folder = tmp_path_factory.mktemp("lm_eval")
    tasks = lm_eval_generation_task_dir(folder / "tasks", n=8)
    runner = LmEvalRunner("dummy", include_path=str(tasks), output_path=str(folder / "out"))
    for task in (LM_EVAL_GEN_TASK, LM_EVAL_TASK):
        runner.evaluate(task, range(8))
    files = sorted(folder.glob("out/**/samples_*.jsonl"))
    assert len(files) == 2
    return files


@pytest.mark.slow  # a real lm-eval run (its import and task indexing, once per module): about 11 s
def test_real_lm_eval_run_responses(client: TestClient, lm_eval_run: list[Path]) -> None:
    files = lm_eval_run
    r = post_lm_eval(client, "dummy", [(p.name, p.read_bytes()) for p in files])
    assert r.status_code == 201, r.text
    assert {t["task"]: t["n_responses"] for t in r.json()["benchmarks"]} == {LM_EVAL_GEN_TASK: 8, LM_EVAL_TASK: 8}
    by_task = {t: [json.loads(line) for p in files if f"samples_{t}_" in p.name for line in p.read_text().splitlines()]
               for t in (LM_EVAL_GEN_TASK, LM_EVAL_TASK)}
    for record in by_task[LM_EVAL_GEN_TASK]:  # lm-eval's DummyLM generates "lol"
        got = response_of(client, LM_EVAL_GEN_TASK, str(record["doc_id"]), "dummy")
        assert got["response"] == record["resps"][0][0] == "lol" and got["extra"] == {"filter": "none"}
    for record in by_task[LM_EVAL_TASK]:
        got = response_of(client, LM_EVAL_TASK, str(record["doc_id"]), "dummy")
        lls = [float(pair[0]) for pair in record["filtered_resps"]]
        assert got["extra"]["loglikelihoods"] == lls and got["extra"]["choice"] == lls.index(max(lls))
        assert got["response"].strip() == record["doc"]["choices"][got["extra"]["choice"]]
        assert (got["extra"]["choice"] == record["doc"]["label"]) == (float(record["acc"]) == 1.0)


# ----------------------------------------------------------------------------- inspect_ai

@pytest.mark.slow  # the inspect_ai run (its import, once per module): about 5 s
def test_inspect_responses_are_the_first_epochs_completion(client: TestClient, inspect_eval: Path) -> None:
    r = post_harness(client, "inspect", [inspect_eval], model="org/mock")
    assert r.status_code == 201, r.text
    assert r.json()["n_responses"] == 9
    for i in range(9):
        got = response_of(client, "arith-resp", f"q{i}", "org/mock")
        answer = str(2 * i) if arith_correct(i) else "no idea"  # what the mock model said (support.harness_runs)
        assert got["response"] == answer and got["source"] == "inspect_ai"
        assert got["extra"]["answer"] == answer and got["extra"]["value"] == ("C" if arith_correct(i) else "I")
        assert got["extra"]["epoch"] == 1 and [e["epoch"] for e in got["extra"]["epochs"]] == [2]
        assert got["extra"]["epochs"][0]["completion"] == answer
    # another model's import of the same log: two responses on the item, one per model
    assert post_harness(client, "inspect", [inspect_eval], model="org/mock-2").status_code == 201
    assert sorted(x["model"] for x in responses(client, "arith-resp", "q4")) == ["org/mock", "org/mock-2"]


# ----------------------------------------------------------------------------- HELM, lighteval

def test_helm_responses_come_from_scenario_state(client: TestClient) -> None:
    run = HELM_DATA / "simple_mcqa"
    r = post_harness(client, "helm", [run / "per_instance_stats.json", run / "scenario_state.json"],
                     benchmark="helm-resp")
    assert r.status_code == 201, r.text
    states = json.loads((run / "scenario_state.json").read_text())["request_states"]
    assert r.json()["n_responses"] == len(states) == 20
    for state in states[:5]:
        got = response_of(client, "helm-resp", state["instance"]["id"], "simple/model1")
        assert got["response"] == state["result"]["completions"][0]["text"] and got["source"] == "helm"
    # the stats alone carry no completion: scores, no responses
    r = post_harness(client, "helm", [run / "per_instance_stats.json"], benchmark="helm-noresp", model="simple/x")
    assert r.status_code == 201 and r.json()["n_responses"] == 0


@pytest.mark.slow  # lighteval's import and its tracker: about 4 s
def test_lighteval_responses_text_and_likeliest_choice(client: TestClient, tmp_path: Path) -> None:
    details, answers, expected = lighteval_generative_details(tmp_path / "gen", n=6)
    r = post_harness(client, "lighteval", [details], split="test", benchmark="le-gen", model="org/dummy-gen")
    assert r.status_code == 201, r.text
    assert r.json()["n_responses"] == 6 and r.json()["mean_score"] == pytest.approx(sum(expected.values()) / 6)
    for item, answer in answers.items():  # an item id with a '/', sent as is or escaped
        assert response_of(client, "le-gen", item, "org/dummy-gen")["response"] == answer
        assert response_of(client, "le-gen", item.replace("/", "%2F"), "org/dummy-gen")["source"] == "lighteval"
    details, results, _ = lighteval_details(tmp_path / "ll", splits={"test": 4})
    r = post_harness(client, "lighteval", [details, results], split="test", benchmark="le-ll")
    assert r.status_code == 201, r.text
    got = response_of(client, "le-ll", "test/1", "org/dummy")  # logprobs [-0.8, -0.3]: the second choice
    assert got["response"] == "4" and got["extra"] == {"kind": "loglikelihood", "choice": 1, "logprobs": [-0.8, -0.3]}


# ----------------------------------------------------------------------------- deletion

def test_responses_go_with_their_model_item_and_benchmark(client: TestClient,
                                                          db_session_factory: sessionmaker[Session]) -> None:
    example = (EXAMPLE.name, EXAMPLE.read_bytes())
    for model in ("org/keep", "org/gone"):
        assert post_lm_eval(client, model, [example]).status_code == 201
    assert count_rows(db_session_factory, ModelResponse) == 40
    assert client.delete("/v1/models/org/gone").status_code == 204
    assert count_rows(db_session_factory, ModelResponse) == 20
    assert [x["model"] for x in responses(client, "arc_easy", "0")] == ["org/keep"]
    with db_session_factory() as s:  # an item's rows cascade in the database itself (no API deletes one item)
        pk = s.scalar(select(Item.pk).join(Benchmark).where(Benchmark.name == "arc_easy", Item.item_id == "0"))
        s.execute(text("DELETE FROM items WHERE pk = :pk"), {"pk": pk})
        s.commit()
    assert count_rows(db_session_factory, ModelResponse) == 19
    assert client.delete("/v1/benchmarks/arc_easy").status_code == 204
    assert count_rows(db_session_factory, ModelResponse) == 0


def test_team_scoping_and_team_deletion(teams: Teams, db_session_factory: sessionmaker[Session]) -> None:
    assert post_lm_eval(teams.a, "org/alpha-model", [(EXAMPLE.name, EXAMPLE.read_bytes())]).status_code == 201
    assert_problem(teams.b.get("/v1/benchmarks/arc_easy/items/0/responses"), 404)  # alpha's private benchmark
    assert teams.a.patch("/v1/benchmarks/arc_easy", json={"visibility": "public"}).status_code == 200
    assert [x["model"] for x in responses(teams.b, "arc_easy", "0")] == ["org/alpha-model"]
    assert_problem(teams.a_read.delete("/v1/teams/alpha"), 403)
    assert teams.admin.delete("/v1/teams/alpha").status_code == 204
    with db_session_factory() as s:
        assert s.scalar(select(func.count()).select_from(ModelResponse)) == 0
        assert s.scalar(select(func.count()).select_from(Model).where(Model.name == "org/alpha-model")) == 0
