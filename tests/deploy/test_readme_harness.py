"""The README's "Use it from your harness" blocks against a live embedded server, as written, from the checkout:
the three curl imports of the example logs the harnesses wrote (examples/inspect, examples/helm,
examples/lighteval), the inspect_ai session (examples/inspect_session.py, shown verbatim; inspect's ``mockllm``)
and the two ``evalplan run lm-eval`` lines (lm-eval's ``dummy`` model on examples/lm-eval/tasks)."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalplan.client import EvalplanClient, EvalplanError
from support.helpers import ROOT, embedded_server
from support.readme import code_blocks, documents, example_body, fresh_shell_env, section, shown_examples

pytestmark = pytest.mark.slow

FAILING_CURL = 'set -euo pipefail\ncurl() { command curl -sSf "$@"; }\n'  # any 4xx/5xx or failed command fails


def blocks() -> list[tuple[str, str]]:
    found = code_blocks(section("Use it from your harness"))
    assert [lang for lang, _ in found] == ["bash", "python", "bash"], found
    return found


def run_bash(block: str, server: EvalplanClient) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(["bash", "-c", FAILING_CURL + block], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=fresh_shell_env(EVALPLAN_URL=server.base_url))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvalplanClient]:
    with embedded_server(tmp_path_factory.mktemp("server"), env={"HF_DATASETS_OFFLINE": "1"}) as client:
        yield client


def test_readme_shows_the_inspect_example_verbatim() -> None:
    path = "examples/inspect_session.py"
    assert shown_examples(section("Use it from your harness")) == {path: example_body(path)}
    assert blocks()[1][1] == example_body(path)


def test_import_examples_run_against_a_live_server(server: EvalplanClient) -> None:
    """Every example file is small and real (see each folder's README.md); each import stores what it holds."""
    block = blocks()[0][1]
    assert block.count("curl -X POST $E/v1/imports/") == 3
    for folder in ("inspect", "helm", "lighteval"):
        files = [p for p in (ROOT / "examples" / folder).iterdir() if p.name != "README.md"]
        assert files and all(p.stat().st_size < 50_000 for p in files), files
        assert all(f"@examples/{folder}/{p.name}" in block for p in files), (folder, files)
    inspect, helm, lighteval = documents(run_bash(block, server).stdout)
    assert (inspect["benchmark"], inspect["model"], inspect["metric"]) == ("arith", "mockllm/model", "match")
    assert (inspect["n_scores"], inspect["n_items"], inspect["n_models"]) == (12, 12, 1)
    assert (helm["benchmark"], helm["model"], helm["metric"]) == ("simple_mcqa", "simple/model1", "exact_match")
    assert (helm["n_scores"], helm["n_items"]) == (5, 5)
    assert (lighteval["benchmark"], lighteval["model"], lighteval["metric"]) == ("localarith", "org/m", "acc")
    assert (lighteval["n_scores"], lighteval["n_items"]) == (10, 10)
    # the lighteval docs are right on even ids (its README.md), in split "test"
    cells = server.list_scores("localarith", limit=100)["items"]
    assert {c["item"]: c["score"] for c in cells} == {f"test/{i}": float(i % 2 == 0) for i in range(10)}


def test_inspect_session_example_runs_against_a_live_server(server: EvalplanClient, tmp_path: Path) -> None:
    from inspect_ai.log import list_eval_logs, read_eval_log

    out = subprocess.run(["./dev.sh", "run", "python", "examples/inspect_session.py"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300,
                         env=fresh_shell_env(EVALPLAN_URL=server.base_url, INSPECT_LOG_DIR=str(tmp_path)))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    logs = list_eval_logs(str(tmp_path))
    assert len(logs) == 1, logs
    log = read_eval_log(logs[0])
    assert log.status == "success"
    meta = log.eval.metadata["evalplan"]
    session = server.get_session(meta["session_id"])
    assert session["benchmark"] == "arith" and session["target"] == "my-ckpt" and session["status"] == "stopped"
    assert len(log.samples) == session["n_observed"] == meta["n_observed"] > 0  # exactly the proposed samples ran
    assert meta["estimate"] == pytest.approx(session["estimate"]) and meta["stop_reason"] == session["stop_reason"]
    posted = {o["item"]: o["score"] for o in server.observations(session["id"], limit=100)["items"]}
    assert posted == {str(s.id): (1.0 if s.scores["match"].value == "C" else 0.0) for s in log.samples}
    assert all(v == float(int(k[1:]) % 3 != 0) for k, v in posted.items())  # the mock model's answers


def test_lm_eval_lines_run_against_a_live_server(server: EvalplanClient) -> None:
    """The block runs as written on a server that has never seen the task (issue 34 failure 2: it assumed
    reference scores nobody had uploaded): its first line uploads the references and makes the coreset it uses."""
    block = blocks()[2][1]
    assert "pretrained=gpt2" not in block and block.count("evalplan run lm-eval") == 2
    assert "<coreset id>" not in block and "examples/lm-eval/references.py" in block
    with pytest.raises(EvalplanError) as missing:
        server.get_benchmark("evalplan_arith")
    assert missing.value.status == 404
    session, prediction = documents(run_bash(block, server).stdout)
    assert session["target"] == "my-ckpt" and session["status"] == "stopped"
    assert session["lm_eval_calls"] == math.ceil(session["n_observed"] / 8)  # one simple_evaluate per batch of 8
    assert server.get_session(session["id"])["n_observed"] == session["n_observed"] > 0
    assert all(server.get_model(f"arith-ref-{m}")["name"] == f"arith-ref-{m}" for m in range(1, 7))
    estimate = prediction["benchmarks"]["evalplan_arith"]
    assert estimate["interval"][0] <= estimate["estimate"] <= estimate["interval"][1]
