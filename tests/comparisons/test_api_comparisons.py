"""``POST /v1/comparisons`` (and GET): sessions side by side, the paired difference on the common
items equal to ``evalplan.core.sequential.paired``'s numbers, the anytime sequence, bad input, team scoping."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from evalplan.core.sequential.paired import paired_interval, paired_sequence
from support.helpers import assert_problem, upload_matrix
from support.teams import (
    Teams,
    no_jobs_teams,  # noqa: F401 (the teams fixture)
)

N_ITEMS = 50
ITEMS = [f"q{j:02d}" for j in range(N_ITEMS)]
REFS = [f"ref{i}" for i in range(8)]


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1, N_ITEMS)
    refs = (rng.random((8, N_ITEMS)) < 1 / (1 + np.exp(difficulty - np.linspace(-1, 1, 8)[:, None]))).astype(float)
    a = (rng.random(N_ITEMS) < 1 / (1 + np.exp(difficulty))).astype(float)
    b = (rng.random(N_ITEMS) < 1 / (1 + np.exp(difficulty - 1.0))).astype(float)
    return refs, a, b


def run(client: TestClient, bench: str, target: str, scores: np.ndarray, items: list[int], **fields: object) -> str:
    r = client.post("/v1/sessions", json={"benchmark": bench, "target": target, "reference_models": REFS,
                                          "method": "rs_mean", "max_items": N_ITEMS, **fields})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    r = client.post(f"/v1/sessions/{sid}/observations",
                    json={"observations": [{"item": ITEMS[j], "score": scores[j]} for j in items]})
    assert r.status_code == 200, r.text
    return str(sid)


def test_paired_comparison_matches_the_core(client: TestClient) -> None:
    refs, a, b = data()
    upload_matrix(client, "cmp", refs, REFS, ITEMS)
    sa = run(client, "cmp", "ckpt-a", a, list(range(30)))
    sb = run(client, "cmp", "ckpt-b", b, list(range(10, 40)))
    r = client.post("/v1/comparisons", json={"sessions": [sa, sb]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["level"] == 0.95 and body["benchmark"] == "cmp" and body["n_items"] == N_ITEMS
    assert [s["id"] for s in body["sessions"]] == [sa, sb]
    assert len(body["sessions"][0]["trajectory"]) == 30
    pair = body["pairs"][0]
    assert pair["a"] == sa and pair["b"] == sb and pair["n_common"] == 20
    common = list(range(10, 30))
    expected = paired_interval(a[common], b[common], n_population=N_ITEMS)
    assert pair["paired"]["mean_difference"] == pytest.approx(expected.mean)
    assert pair["paired"]["interval"] == pytest.approx(list(expected.interval))
    seq = paired_sequence(a[common], b[common], n_population=N_ITEMS, score_range=(0.0, 1.0))
    assert pair["anytime"]["interval"] == pytest.approx(list(seq[-1]))
    assert len(pair["anytime"]["sequence"]) == 20
    assert pair["paired"]["verdict"] in ("b_better", "a_better", "undecided")
    est = pair["estimates"]
    sessions = body["sessions"]
    assert est["difference"] == pytest.approx(sessions[1]["estimate"] - sessions[0]["estimate"])
    again = client.get("/v1/comparisons", params={"sessions": f"{sa},{sb}", "level": 0.8}).json()
    assert again["level"] == 0.8 and again["pairs"][0]["paired"]["mean_difference"] == pytest.approx(expected.mean)
    width80 = np.diff(again["pairs"][0]["paired"]["interval"])[0]
    assert width80 < np.diff(pair["paired"]["interval"])[0]


def test_bad_input(client: TestClient) -> None:
    refs, a, b = data()
    upload_matrix(client, "cmp", refs, REFS, ITEMS)
    upload_matrix(client, "other", refs, REFS, ITEMS)
    sa = run(client, "cmp", "ckpt-a", a, [0, 1])
    so = run(client, "other", "ckpt-b", b, [0, 1])
    assert "sessions" in str(assert_problem(client.post("/v1/comparisons", json={"sessions": [sa]}), 422))
    assert_problem(client.post("/v1/comparisons", json={"sessions": [sa, sa]}), 422)
    assert "another benchmark" in str(assert_problem(client.post("/v1/comparisons", json={"sessions": [sa, so]}), 422))
    assert_problem(client.post("/v1/comparisons", json={"sessions": [sa, "ss_nope"]}), 404)
    assert_problem(client.post("/v1/comparisons", json={"sessions": [sa, so], "level": 2}), 422)
    assert_problem(client.post("/v1/comparisons", json={"sessions": [sa, so], "extra": 1}), 422)
    sb = run(client, "cmp", "ckpt-c", b, [5, 6])  # no common item: no paired result, still the estimates
    pair = client.post("/v1/comparisons", json={"sessions": [sa, sb]}).json()["pairs"][0]
    assert pair["n_common"] == 0 and pair["paired"] is None and pair["estimates"] is not None


def test_second_team_compares_public_sessions_only(teams: Teams) -> None:
    refs, a, b = data()
    upload_matrix(teams.a, "cmp", refs, REFS, ITEMS)
    assert teams.a.patch("/v1/benchmarks/cmp", json={"visibility": "public"}).status_code == 200
    sa = run(teams.a, "cmp", "ckpt-a", a, list(range(20)), visibility="public")
    sb = run(teams.a, "cmp", "ckpt-b", b, list(range(20)), visibility="public")
    private = run(teams.a, "cmp", "ckpt-c", b, list(range(20)))
    r = teams.b.post("/v1/comparisons", json={"sessions": [sa, sb]})
    assert r.status_code == 200, r.text
    assert r.json()["pairs"][0]["n_common"] == 20
    assert_problem(teams.b.post("/v1/comparisons", json={"sessions": [sa, private]}), 404)
    assert teams.a.post("/v1/comparisons", json={"sessions": [sa, private]}).status_code == 200
