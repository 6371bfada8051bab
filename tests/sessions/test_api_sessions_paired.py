"""Paired comparison sessions (issue 33 item 2): ``compare_to`` a model or an earlier session estimates
target - compare_to on the same randomly drawn items and stops on a decision (better, worse, within +-delta);
located 422s store nothing. On SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from test_api_sessions_stop import upload

from support.teams import (
    Teams,
    no_jobs_teams,  # noqa: F401 (the teams fixture)
)


def run(client: TestClient, session: dict, truth: dict) -> dict:
    while session["status"] == "active":
        item = session["next_items"][0]
        r = client.post(f"/v1/sessions/{session['id']}/observations", json={"item": item, "score": truth[item]})
        assert r.status_code == 200, r.text
        session = r.json()
    return session


def test_paired_session_stops_on_a_right_decision(client: TestClient) -> None:
    data = upload(client, "pairedbench")
    truth_a, truth_b = data["truth"]["tgt-a"], data["truth"]["tgt-b"]
    true_difference = float(np.mean([truth_a[i] - truth_b[i] for i in data["items"]]))
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a", "compare_to": "tgt-b",
                                          "delta": 0.3, "reference_models": data["refs"], "seed": 2})
    assert r.status_code == 201, r.text
    session = r.json()
    assert session["method"] == "random" and session["compare"]["model"] == "tgt-b"
    assert session["compare"]["kind"] == "model" and session["compare"]["population"] == len(data["items"])
    assert session["compare"]["decision"] is None and session["compare"]["delta"] == 0.3
    done = run(client, session, truth_a)
    compare = done["compare"]
    lo, hi = compare["difference_ci"]
    assert lo <= true_difference <= hi
    if done["stop_reason"] == "decision":
        assert compare["decision"] in ("better", "worse", "within") and compare["decided_at"] == done["n_observed"]
        assert {"better": true_difference > 0, "worse": true_difference < 0,
                "within": abs(true_difference) <= 0.3}[compare["decision"]]
        assert compare["moves"][-1] == {"n": done["n_observed"], "decision": compare["decision"]}
    # the target's own interval is the comparator's known mean plus the difference's
    mean_b = float(np.mean(list(truth_b.values())))
    assert done["ci"][0] == pytest.approx(max(0.0, mean_b + lo)) and done["ci"][1] == pytest.approx(min(1.0, mean_b + hi))
    traj = client.get(f"/v1/sessions/{done['id']}/trajectory").json()
    assert len(traj) == done["n_observed"] and all("difference_ci" in p and "decision" in p for p in traj)
    page = client.get(f"/ui/sessions/{done['id']}")
    assert page.status_code == 200 and "Paired comparison: tgt-a - tgt-b" in page.text
    assert "How the decision moved" in page.text or not compare["moves"]
    if compare["decision"]:
        assert f"<strong>{compare['decision']}</strong>" in page.text or compare["decision"] in page.text
    # a paired session takes only the items it proposes
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a", "compare_to": "tgt-b",
                                          "reference_models": data["refs"], "seed": 2})
    fresh = r.json()
    page = client.get("/ui/compare", params={"sessions": f"{done['id']},{fresh['id']}"})
    assert page.status_code == 200 and "Paired sessions (compare_to)" in page.text and "tgt-a - tgt-b" in page.text
    api = client.get("/v1/comparisons", params={"sessions": f"{done['id']},{fresh['id']}"}).json()
    assert api["sessions"][0]["compare"]["decision"] == compare["decision"]
    other = next(i for i in data["items"] if i not in fresh["next_items"])
    r = client.post(f"/v1/sessions/{fresh['id']}/observations", json={"item": other, "score": truth_a[other]})
    assert r.status_code == 409 and r.json()["errors"][0]["proposed"] == fresh["next_items"]


def test_compare_to_an_earlier_session_uses_its_observed_items(client: TestClient) -> None:
    data = upload(client, "pairedbench2")
    truth_b = data["truth"]["tgt-b"]
    # the earlier checkpoint's session: 30 random items of "ckpt-1" (scores of tgt-b, a model with no stored scores)
    earlier = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "ckpt-1", "method": "random",
                                                "reference_models": data["refs"], "max_items": 30}).json()
    earlier = run(client, earlier, truth_b)
    assert earlier["n_observed"] == 30
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "ckpt-2", "compare_to": earlier["id"],
                                          "delta": 0.05, "reference_models": data["refs"]})
    assert r.status_code == 201, r.text
    compare = r.json()["compare"]
    assert compare["kind"] == "session" and compare["model"] == "ckpt-1" and compare["population"] == 30
    observed = {o["item"] for o in client.get(f"/v1/sessions/{earlier['id']}/observations",
                                              params={"limit": 100}).json()["items"]}
    assert set(r.json()["next_items"]) <= observed
    done = run(client, r.json(), truth_b)  # the same scores: the difference is exactly 0
    assert done["stop_reason"] == "decision" and done["compare"]["decision"] == "within"
    assert done["compare"]["difference"] == 0.0


@pytest.mark.parametrize(("extra", "field"), [
    ({"compare_to": "no-such-model"}, "compare_to"),
    ({"compare_to": "tgt-a"}, "compare_to"),  # the target itself
    ({"compare_to": "ss_000000000000000000000000"}, "compare_to"),
    ({"compare_to": "tgt-b", "delta": 0}, "delta"),
    ({"compare_to": "tgt-b", "delta": -0.1}, "delta"),
    ({"compare_to": "tgt-b", "delta": 1.5}, "delta"),  # wider than the binary score range
    ({"delta": 0.02}, "delta"),  # without compare_to
    ({"compare_to": "tgt-b", "previous": ["tgt-a"]}, "previous"),
    ({"previous": ["tgt-a"]}, "previous.0"),  # previous naming the target
    ({"compare_to": "tgt-b", "method": "bayesame"}, "method"),
    ({"compare_to": "tgt-b", "method_params": {"interval": "paper_normal"}}, "method_params"),  # ignored before
    ({"compare_to": "tgt-b", "method": "random", "method_params": {"interval": "paper_normal"}}, "method_params"),
])
def test_bad_paired_input_is_located_and_stores_nothing(client: TestClient, extra: dict, field: str) -> None:
    data = upload(client, "pairedbench3")
    before = client.get("/v1/sessions", params={"limit": 100}).json()["items"]
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a",
                                          "reference_models": data["refs"], **extra})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["errors"][0]["field"] == field, r.json()
    assert client.get("/v1/sessions", params={"limit": 100}).json()["items"] == before


def test_another_teams_private_model_is_unknown(teams: Teams) -> None:
    data = upload(teams.a, "pairedteam", visibility="public")  # alpha's public benchmark
    r = teams.b.post("/v1/models", json={"name": "beta-secret"})  # beta's private model, no scores here
    assert r.status_code == 201, r.text
    r = teams.a.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a", "compare_to": "beta-secret",
                                           "reference_models": data["refs"]})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "compare_to"
    assert "no model or session" in r.json()["errors"][0]["detail"]
    # beta's private session is unknown to alpha too
    own = teams.b.post("/v1/sessions", json={"benchmark": data["name"], "target": "beta-ckpt", "method": "random",
                                             "reference_models": data["refs"]})
    assert own.status_code == 201, own.text
    r = teams.a.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a",
                                           "compare_to": own.json()["id"], "reference_models": data["refs"]})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "compare_to"
