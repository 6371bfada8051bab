"""POST /v1/backtests with ``sequential: true`` (issue 11 §4) on a GENERATED 2-PL benchmark: a real
in-process job with progress whose rows equal the offline engine's; bad inputs 422 with no job; the
offline ``evalplan backtest --sequential`` prints the same table."""

from __future__ import annotations

import math

import numpy as np

from evalplan.cli import main as cli_main
from evalplan.core.backtest.sequential_backtest import markdown_table, run_sequential_backtest, session_estimators
from evalplan.core.sequential.stopping import StopRule
from support.helpers import two_pl as generated_two_pl
from support.helpers import upload_matrix, wait_for_job

N_MODELS, N_ITEMS = 30, 60


def two_pl(seed: int) -> np.ndarray:
    return generated_two_pl(seed, N_MODELS, N_ITEMS).astype(int)


def upload(client, bench: str, Y: np.ndarray) -> None:
    upload_matrix(client, bench, Y, [f"{bench}_m{m:02d}" for m in range(Y.shape[0])],
                  [f"q{j:03d}" for j in range(Y.shape[1])])


BODY = {"sequential": True, "benchmarks": "seqgen", "methods": ["rs_mean", "bayesame_rs"], "budgets": [5, 20],
        "stop": [{"half_width": 0.15}, {"half_width": 0.3, "anytime_valid": True}],
        "regimes": ["interpolation", "extrapolation"], "n_targets": 4, "max_items": {"fraction": 0.5}}


def test_sequential_backtest_job_equals_the_offline_engine(committed_client, tmp_path) -> None:
    client = committed_client
    Y = two_pl(2)
    upload(client, "seqgen", Y)
    r = client.post("/v1/backtests", json=BODY)
    assert r.status_code == 202, r.text
    done = wait_for_job(client, r.json()["job"]["id"], timeout=300)
    assert done["status"] == "succeeded", done
    assert done["kind"] == "sequential_backtest" and done["queue"] == "cpu" and done["progress"] == 1.0
    result = done["result"]
    assert result["sequential"] is True and result["budgets"] == [5, 20]
    assert [(row["regime"], row["method"]) for row in result["rows"]] == [
        (g, m) for g in ("interpolation", "extrapolation") for m in ("rs_mean", "bayesame_rs")]
    rules = [StopRule(0.15), StopRule(0.3, anytime_valid=True)]
    for regime in ("interpolation", "extrapolation"):
        offline = run_sequential_backtest(Y.astype(float), {m: session_estimators()[m] for m in BODY["methods"]},
                                          regime=regime, n_targets=4, budgets=[5, 20], stops=rules, max_items=30)
        mine = [row for row in result["rows"] if row["regime"] == regime]
        for got, want in zip(mine, offline["rows"]):
            assert got["benchmark"] == "seqgen" and got["n_targets"] == 4
            for key in ("mae", "rmse", "coverage"):
                assert got[key] == want[key], key
            for g, w in zip(got["stops"], want["stops"]):
                for k, v in w.items():
                    assert g[k] == (None if isinstance(v, float) and math.isnan(v) else v), k
            for b in ("5", "20"):
                assert got["rmse"][b] >= got["mae"][b] >= 0 and 0 <= got["coverage"][b] <= 1
            assert 1 <= got["stops"][0]["mean_items"] <= 30
    setup = {s["regime"]: s for s in result["setups"]}
    assert setup["extrapolation"]["gap"] == 6 and setup["interpolation"]["n_references"] == N_MODELS - 4
    assert setup["interpolation"]["n_max"] == 30
    assert len(result["targets"]) == 2 * 2 * 4 and all(t["target"].startswith("seqgen_m") for t in result["targets"])

    # the same offline, from the wide CSV
    csv_path = tmp_path / "seqgen.csv"
    csv_path.write_text(client.get("/v1/benchmarks/seqgen/scores", headers={"Accept": "text/csv"}).text)
    out = tmp_path / "out.md"
    assert cli_main(["backtest", "--sequential", "--scores", str(csv_path), "--methods", "rs_mean,bayesame_rs",
                     "--budgets", "5,20", "--half-widths", "0.15", "--regimes", "interpolation", "--targets", "4",
                     "--max-items", "30", "--output", str(out)]) == 0
    offline = run_sequential_backtest(Y.astype(float), {m: session_estimators()[m] for m in BODY["methods"]},
                                      regime="interpolation", n_targets=4, budgets=[5, 20], stops=[StopRule(0.15)],
                                      max_items=30)
    assert markdown_table(offline["rows"], [5, 20]) in out.read_text()


BAD = [
    ({"methods": ["magic"]}, 422, "methods.0"),
    ({"budgets": [0.5]}, 422, "budgets.0"),
    ({"budgets": [5, 5]}, 422, "budgets"),
    ({"stop": {"half_width": -1}}, 422, "stop.half_width"),
    ({"stop": [{"half_width": 0.1}, {"half_width": 0.1, "level": 2}]}, 422, "stop.1.level"),
    ({"stop": {"half_width": 0.1, "level": 0.9}}, 422, "stop.level"),
    ({"regimes": ["sideways"]}, 422, "regimes.0"),
    ({"n_targets": 0}, 422, "n_targets"),
    ({"n_targets": 29}, 422, "n_targets"),
    ({"regimes": ["extrapolation"], "n_targets": 23}, 422, "n_targets"),
    ({"reference_cap": 1}, 422, "reference_cap"),
    ({"max_items": {"fraction": 3}}, 422, "max_items.fraction"),
    ({"level": 1.0}, 422, "level"),
    ({"n_reference": 10}, 422, "n_reference"),
    ({"split": "random"}, 422, "split"),
    ({"benchmarks": "missing"}, 404, None),
]


def test_bad_sequential_inputs_create_no_job(client) -> None:
    upload(client, "seqgen", two_pl(3))
    base = {"sequential": True, "benchmarks": "seqgen", "methods": ["rs_mean"]}
    for change, status, field in BAD:
        r = client.post("/v1/backtests", json={**base, **change})
        assert r.status_code == status, (change, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        if field is not None:
            assert field in [e.get("field") for e in r.json()["errors"]], (change, r.json())
    r = client.post("/v1/backtests", json={"benchmarks": "seqgen", "methods": ["random"], "stop": {"half_width": 1}})
    assert r.status_code == 422 and "stop" in [e.get("field") for e in r.json()["errors"]]
    r = client.post("/v1/backtests", json={"benchmarks": "seqgen"})
    assert r.status_code == 422 and "methods" in [e.get("field") for e in r.json()["errors"]]
    assert client.get("/v1/jobs").json()["items"] == []
