"""POST /v1/plans end to end (API.md "Plans", issue 16 §4) on GENERATED 2-PL benchmarks: a two-benchmark
plan as a real in-process job on both backends (per benchmark {method, budget, expected_rmse,
interval_width, evidence}, the same numbers as evalplan.core.backtest.planner offline, and the suite total), the CLI
on a CSV, and every bad input answered 422 / 404 problem+json with no job created."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evalplan.cli import main as cli_main
from evalplan.core.backtest.planner import Candidate, plan_benchmark
from evalplan.core.backtest.session_planner import plan_session
from support.helpers import assert_problem, upload_matrix, wait_for_job, wide_csv
from support.helpers import two_pl as generated_two_pl


def two_pl(seed: int, n_models: int = 24, n_items: int = 60) -> np.ndarray:
    return generated_two_pl(seed, n_models, n_items).astype(int)


def upload(client, bench: str, Y: np.ndarray, prefix: str = "m") -> list[str]:
    names = [f"{prefix}{i:02d}" for i in range(Y.shape[0])]
    upload_matrix(client, bench, Y, names, [f"q{j:03d}" for j in range(Y.shape[1])])
    return names


def test_plan_job_two_benchmarks(committed_client) -> None:
    client = committed_client
    upload(client, "gen_a", two_pl(1))
    upload(client, "gen_b", two_pl(2, n_items=40))
    body = {"benchmarks": ["gen_a", "gen_b"], "half_width": 0.08, "level": 0.9,
            "methods": ["random", "pbsc:kernel_ridge"], "seeds": 2}
    r = client.post("/v1/plans", json=body)
    assert r.status_code == 202, r.text
    job = r.json()["job"]
    assert r.headers["location"] == f"/v1/jobs/{job['id']}"
    done = wait_for_job(client, job["id"], timeout=240)
    assert done["status"] == "succeeded", done
    assert done["kind"] == "plan" and done["queue"] == "cpu" and done["progress"] == 1.0
    result = done["result"]
    assert result["half_width"] == 0.08 and result["level"] == 0.9
    assert result["candidates"] == ["random:mean", "pbsc:kernel_ridge"]
    for name, Y in (("gen_a", two_pl(1)), ("gen_b", two_pl(2, n_items=40))):
        plan = result["benchmarks"][name]
        assert {"method", "budget", "expected_rmse", "interval_width", "evidence"} <= set(plan)
        assert plan["n_references"] == 24 and plan["n_items"] == Y.shape[1]
        offline = plan_benchmark(Y.astype(float), 0.08, 0.9, [Candidate("random", "mean"),
                                                              Candidate("pbsc", "kernel_ridge")], seeds=2)
        for key in ("method", "predictor", "budget", "stopped"):
            assert plan[key] == offline[key], key
        assert plan["expected_rmse"] == pytest.approx(offline["expected_rmse"], abs=1e-12)
        assert plan["interval_width"] == pytest.approx(offline["interval_width"], abs=1e-12)
        assert [(e["method"], e["budget"]) for e in plan["evidence"]] == \
            [(e["method"], e["budget"]) for e in offline["evidence"]]
        # the width of the rule the coreset will report (issue 16 §2): calibrated for score-based methods
        assert {e["method"]: e["interval_rule"] for e in plan["evidence"]} == \
            {"random": "finite_population", "pbsc": "calibrated"}
        if plan["method"] != "full":
            assert plan["interval_width"] / 2 <= 0.08
            assert plan["interval_rule"] == ("calibrated" if plan["method"] == "pbsc" else "finite_population")
        # the default session on held-out references (issue 33 item 5): what the service's sessions do offline
        session = plan["session"]
        offline_session = plan_session(Y.astype(float), 0.08, 0.9, n_targets=8)
        assert session["method"] == "active_design" and session["baseline"] == "random"
        for regime in ("random_models", "best_models"):
            got, want = session["regimes"][regime], offline_session["regimes"][regime]
            assert got["targets"] == want["targets"] == 8
            assert [r["items"] for r in got["runs"]] == [r["items"] for r in want["runs"]]
            assert [r["items"] for r in got["random_runs"]] == [r["items"] for r in want["random_runs"]]
            assert got["vs_random"] == pytest.approx(got["items"] / got["random"]["items"])
        assert session["items"] == session["regimes"]["random_models"]["items"]
        assert session["best_models"]["items"] == session["regimes"]["best_models"]["items"]
    suite = result["suite"]
    assert suite["split"] == {n: result["benchmarks"][n]["budget"] for n in ("gen_a", "gen_b")}
    assert suite["total_items"] == sum(suite["split"].values()) and suite["n_items"] == 100
    assert suite["session"]["items"] == pytest.approx(sum(result["benchmarks"][n]["session"]["items"]
                                                          for n in ("gen_a", "gen_b")))
    assert suite["session"]["n_items"] == 100


def test_plan_with_the_conformal_rule(committed_client) -> None:
    """``params[method].interval: "conformal"``: the plan sizes the budget with the old rule's width and
    reports it, so that the coreset built with those params reports the planned width."""
    client = committed_client
    upload(client, "gen", two_pl(4))
    body = {"benchmarks": "gen", "half_width": 0.08, "level": 0.9, "methods": ["pbsc:kernel_ridge"], "seeds": 1,
            "params": {"pbsc": {"interval": "conformal"}}}
    r = client.post("/v1/plans", json=body)
    assert r.status_code == 202, r.text
    done = wait_for_job(client, r.json()["job"]["id"], timeout=240)
    assert done["status"] == "succeeded", done
    plan = done["result"]["benchmarks"]["gen"]
    offline = plan_benchmark(two_pl(4).astype(float), 0.08, 0.9, [Candidate("pbsc", "kernel_ridge")], seeds=1,
                             params={"pbsc": {"interval": "conformal"}})
    assert all(e["interval_rule"] == "conformal" for e in plan["evidence"])
    assert [e["interval_width"] for e in plan["evidence"]] == pytest.approx([e["interval_width"]
                                                                             for e in offline["evidence"]])
    if plan["method"] != "full":
        assert plan["params"] == {"interval": "conformal"} and plan["interval_rule"] == "conformal"
    r = client.post("/v1/plans", json={**body, "params": {"pbsc": {"interval": "wide"}}})
    assert r.status_code == 422 and "params.pbsc.interval" in r.text, r.text


def test_plan_with_listed_references(committed_client) -> None:
    client = committed_client
    names = upload(client, "gen", two_pl(3, n_models=30))
    refs = names[:20]
    r = client.post("/v1/plans", json={"benchmarks": "gen", "half_width": 0.1, "level": 0.9,
                                       "reference_models": refs, "methods": ["random"], "seeds": 1})
    assert r.status_code == 202, r.text
    done = wait_for_job(client, r.json()["job"]["id"], timeout=120)
    assert done["status"] == "succeeded", done
    plan = done["result"]["benchmarks"]["gen"]
    assert plan["n_references"] == 20
    offline = plan_benchmark(two_pl(3, n_models=30)[:20].astype(float), 0.1, 0.9, [Candidate("random", "mean")],
                             seeds=1)
    assert plan["budget"] == offline["budget"] and plan["expected_rmse"] == pytest.approx(offline["expected_rmse"])


BAD = [
    ({"half_width": 0}, 422, "half_width"),
    ({"half_width": -0.1}, 422, "half_width"),
    ({"level": 1.0}, 422, "level"),
    ({"level": 0}, 422, "level"),
    ({"methods": []}, 422, "methods"),
    ({"methods": ["nope"]}, 422, "methods.0"),
    ({"methods": ["random", "random:kernel_ridge"]}, 422, "methods.1"),
    ({"methods": ["mrmr", "mrmr:kernel_ridge"]}, 422, "methods.1"),
    ({"budgets": [0.1, 1.0]}, 422, "budgets.1"),
    ({"budgets": [0.1, 0.1]}, 422, "budgets"),
    ({"budgets": []}, 422, "budgets"),
    ({"seeds": 0}, 422, "seeds"),
    ({"seeds": 11}, 422, "seeds"),
    ({"max_seconds": 0}, 422, "max_seconds"),
    ({"session_targets": -1}, 422, "session_targets"),
    ({"session_targets": 41}, 422, "session_targets"),
    ({"session_targets": "four"}, 422, "session_targets"),
    ({"params": {"mrmr": {"scheme": "nope"}}}, 422, "params.mrmr"),
    ({"params": {"lasso": {}}}, 422, "params.lasso"),
    ({"params": {"random": {"k": 2}}}, 422, "params.random"),
    ({"methods": ["anchor_points"], "params": {"anchor_points": {"n_inti": 1}}}, 422, "params.anchor_points.n_inti"),
    ({"reference_models": "some"}, 422, None),
    ({"reference_models": ["m00", "m00"]}, 422, "reference_models"),
    ({"reference_models": ["m00", "m01", "m02"]}, 422, "reference_models"),
    ({"reference_models": ["nobody"]}, 404, None),
    ({"reference_models": ["x00"] + [f"m{i:02d}" for i in range(12)]}, 422, "reference_models"),
    ({"level": 0.99}, 422, "reference_models"),
    ({"benchmarks": "missing"}, 404, None),
    ({"benchmarks": ["gen", "gen"]}, 422, "benchmarks"),
    ({"benchmarks": "tiny"}, 422, "benchmarks"),
    ({"surprise": 1}, 422, None),
]


def test_bad_inputs_create_no_job(client) -> None:
    upload(client, "gen", two_pl(1))
    upload(client, "other", two_pl(4, n_models=3, n_items=5), prefix="x")
    upload(client, "tiny", two_pl(5, n_items=2))
    base = {"benchmarks": "gen", "half_width": 0.05, "level": 0.9, "methods": ["random", "mrmr"]}
    for change, status, field in BAD:
        r = client.post("/v1/plans", json={**base, **change})
        assert r.status_code == status, (change, r.text)
        problem = assert_problem(r, status)
        if field is not None:
            assert field in [e.get("field") for e in problem["errors"]], (change, problem)
    assert client.get("/v1/jobs").json()["items"] == []


def test_cli_plan(tmp_path, capsys) -> None:
    Y = two_pl(6)
    path = tmp_path / "gen.csv"
    path.write_text(wide_csv(Y, [f"m{i}" for i in range(Y.shape[0])], [f"q{j}" for j in range(Y.shape[1])]))
    assert cli_main(["plan", "--scores", str(path), "--half-width", "0.08", "--level", "0.9",
                     "--methods", "random", "--seeds", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    offline = plan_benchmark(Y.astype(float), 0.08, 0.9, [Candidate("random", "mean")], seeds=1)
    plan = out["benchmarks"][str(path)]
    assert plan["budget"] == offline["budget"] and plan["method"] == offline["method"]
    assert out["suite"]["total_items"] == offline["budget"]
    offline_session = plan_session(Y.astype(float), 0.08, 0.9, n_targets=8)
    assert plan["session"]["items"] == offline_session["items"]
    assert plan["session"]["best_models"]["items"] == offline_session["best_models"]["items"]
    assert out["suite"]["session"]["items"] == offline_session["items"]
    assert cli_main(["plan", "--scores", str(path), "--half-width", "0.08", "--level", "0.9",
                     "--methods", "random", "--seeds", "1", "--session-targets", "2"]) == 0
    text = capsys.readouterr().out
    assert "suite:" in text and "A session instead" in text and "| the best | 2 |" in text
    assert cli_main(["plan", "--scores", str(path), "--half-width", "0.08", "--methods", "random",
                     "--session-targets", "0", "--json"]) == 0
    assert "session" not in json.loads(capsys.readouterr().out)["benchmarks"][str(path)]
    assert cli_main(["plan", "--scores", str(path), "--half-width", "0.08", "--session-targets", "41"]) == 2
    assert "n_targets" in capsys.readouterr().err
    assert cli_main(["plan", "--scores", str(path), "--half-width", "0.08", "--methods", "nope"]) == 2
    assert "unknown method" in capsys.readouterr().err


def test_plan_plot_savings_and_progress(committed_client) -> None:
    """``GET /v1/plans/{id}/plot.svg`` / ``.png`` (the budget curve per method, the chosen point), 409 while the
    id is unknown; the result's
    ``savings`` against running everything, in items and (``cost_per_item``) compute; progress reaches 1."""
    client = committed_client
    upload(client, "gen_p", two_pl(5))
    r = client.post("/v1/plans", json={"benchmarks": "gen_p", "half_width": 0.08, "level": 0.9,
                                       "methods": ["random", "pbsc:kernel_ridge"], "seeds": 1, "cost_per_item": 3.0})
    assert r.status_code == 202, r.text
    done = wait_for_job(client, r.json()["job"]["id"], timeout=240)
    assert done["status"] == "succeeded" and done["progress"] == 1.0, done
    plan = done["result"]["benchmarks"]["gen_p"]
    savings = done["result"]["savings"]
    assert savings["items"] == plan["budget"] and savings["all_items"] == 60
    assert savings["saved_items"] == 60 - plan["budget"]
    assert savings["saved_cost"] == pytest.approx(3.0 * (60 - plan["budget"]))
    assert savings["rows"][0]["benchmark"] == "gen_p"
    svg = client.get(f"/v1/plans/{done['id']}/plot.svg")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert "<svg" in svg.text and "chosen_marks" in svg.text and "curve_marks" in svg.text
    png = client.get(f"/v1/plans/{done['id']}/plot.png")
    assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert client.get(f"/v1/jobs/{done['id']}/plot.svg").status_code == 200
    assert_problem(client.get("/v1/plans/no-such-job/plot.svg"), 404)
    bad = client.post("/v1/plans", json={"benchmarks": "gen_p", "half_width": 0.08, "cost_per_item": -1})
    assert_problem(bad, 422)
    assert "cost_per_item" in bad.text
