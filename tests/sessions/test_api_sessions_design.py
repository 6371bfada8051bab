"""The default session method ``active_design`` over HTTP (docs/SEQUENTIAL.md): the resolved name, the
interval kind and both estimates in the response, the recorded probabilities in the trajectory, a
precision stop on the confidence sequence, the fixed-n interval at a fixed budget, and 422s for the
combinations that would not be valid; on SQLite and PostgreSQL."""

from __future__ import annotations

from fastapi.testclient import TestClient
from test_api_sessions_stop import upload

from evalplan.core.sequential import DEFAULT_METHOD


def post(client: TestClient, session: dict, item: str, score: float) -> dict:
    r = client.post(f"/v1/sessions/{session['id']}/observations", json={"item": item, "score": score})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_default_stops_on_the_sequential_rule_and_says_so(client: TestClient) -> None:
    """Issue 33: the default session stops on the sequential (Chow-Robbins, guarded) interval, and its
    response names the rule that stopped it."""
    assert DEFAULT_METHOD == "active_design"
    data = upload(client, "designbench5")
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a", "seed": 4,
                                          "reference_models": data["refs"], "stop": {"half_width": 0.2}})
    assert r.status_code == 201, r.text
    session = r.json()
    assert session["method"] == "active_design" and session["interval_kind"] == "sequential"
    truth = data["truth"]["tgt-a"]
    while session["status"] == "active":
        session = post(client, session, session["next_items"][0], truth[session["next_items"][0]])
        lo, hi = session["ci"]
        assert lo <= session["estimate"] <= hi
    assert session["stop_reason"] == "precision" and (hi - lo) / 2 <= 0.2
    assert session["design"]["stop_rule"] == "chow_robbins_floor_cs_guard"
    again = client.get(f"/v1/sessions/{session['id']}").json()
    assert again["design"]["stop_rule"] == "chow_robbins_floor_cs_guard" and again["interval_kind"] == "sequential"


def test_anytime_stops_on_its_confidence_sequence(client: TestClient) -> None:
    data = upload(client, "designbench")
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a", "seed": 4,
                                          "reference_models": data["refs"], "stop": {"half_width": 0.2},
                                          "interval_kind": "anytime"})
    assert r.status_code == 201, r.text
    session = r.json()
    assert session["method"] == "active_design" and session["config"]["method"] == "active_design"
    assert session["interval_kind"] == "anytime" and session["design"]["uniform_share"] > 0
    assert session["design"]["stop_rule"] == "betting_cs"
    truth = data["truth"]["tgt-a"]
    widths = []
    while session["status"] == "active":
        session = post(client, session, session["next_items"][0], truth[session["next_items"][0]])
        lo, hi = session["ci"]
        widths.append(hi - lo)
        assert lo <= session["estimate"] <= hi
    assert session["stop_reason"] == "precision" and widths[-1] / 2 <= 0.2
    assert all(b <= a + 1e-12 for a, b in zip(widths, widths[1:]))  # running intersection
    assert {"model_estimate", "design_estimate", "extrapolation"} <= set(session["design"])
    traj = client.get(f"/v1/sessions/{session['id']}/trajectory").json()
    assert len(traj) == session["n_observed"] and all(0 < p["probability"] <= 1 for p in traj)
    stored = client.get(f"/v1/sessions/{session['id']}/observations", params={"limit": 200}).json()["items"]
    assert sorted((o["n"], o["probability"]) for o in stored) == [(p["n"], p["probability"]) for p in traj]
    again = client.get(f"/v1/sessions/{session['id']}").json()
    assert again["interval_kind"] == "anytime" and again["estimate"] == session["estimate"]


def test_fixed_budget_may_ask_for_the_fixed_n_interval(client: TestClient) -> None:
    data = upload(client, "designbench2")
    body = {"benchmark": data["name"], "target": "tgt-b", "reference_models": data["refs"], "max_items": 30,
            "seed": 1}
    a = client.post("/v1/sessions", json=body).json()
    b = client.post("/v1/sessions", json={**body, "interval_kind": "fixed_n"}).json()
    assert b["interval_kind"] == "fixed_n" and b["config"]["interval_kind"] == "fixed_n"
    truth = data["truth"]["tgt-b"]
    while a["status"] == "active":
        assert a["next_items"] == b["next_items"]  # same design, same items
        a = post(client, a, a["next_items"][0], truth[a["next_items"][0]])
        b = post(client, b, b["next_items"][0], truth[b["next_items"][0]])
    assert a["stop_reason"] == b["stop_reason"] == "max_items"
    assert b["ci"][1] - b["ci"][0] < a["ci"][1] - a["ci"][0]


def test_invalid_interval_kind_combinations_are_422(client: TestClient) -> None:
    data = upload(client, "designbench3")
    base = {"benchmark": data["name"], "target": "tgt-a", "reference_models": data["refs"]}
    r = client.post("/v1/sessions", json={**base, "interval_kind": "fixed_n", "stop": {"half_width": 0.1}})
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
    assert "interval_kind" in r.text
    r = client.post("/v1/sessions", json={**base, "interval_kind": "fixed_n", "method": "bayesame"})
    assert r.status_code == 422 and "interval_kind" in r.text
    r = client.post("/v1/sessions", json={**base, "interval_kind": "sometimes"})
    assert r.status_code == 422


def test_explicit_methods_keep_their_behaviour(client: TestClient) -> None:
    data = upload(client, "designbench4")
    for method in ("bayesame", "rs_mean", "bayesame_rs"):
        r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a", "method": method,
                                              "reference_models": data["refs"], "max_items": 5})
        assert r.status_code == 201, r.text
        assert r.json()["method"] == method and "interval_kind" not in r.json()


def test_former_names_answer_with_refgp_and_its_parameters(client: TestClient) -> None:
    data = upload(client, "designbench5")
    base = {"benchmark": data["name"], "target": "tgt-a", "reference_models": data["refs"], "max_items": 5}
    r = client.post("/v1/sessions", json={**base, "method": "refgp_ivr"})
    assert r.status_code == 201, r.text
    assert r.headers["deprecation"] == "true" and "deprecation" in r.headers["link"]
    old = r.json()
    assert old["method"] == "refgp" and old["config"]["method_params"] == {
        "mean": "reference", "variance": "model", "selection": "ivr", "directions": 16}
    new = client.post("/v1/sessions", json={**base, "method": "refgp", "method_params": old["config"]["method_params"]})
    assert new.status_code == 201 and "deprecation" not in new.headers
    assert new.json()["next_items"] == old["next_items"] and new.json()["estimate"] == old["estimate"]
    r = client.post("/v1/sessions", json={**base, "method": "refgp", "method_params": {"mean": "nonsense"}})
    assert r.status_code == 422 and "method_params" in r.text
    # the parameters combine beyond the presets (one class), except a design-based variance without random items
    mixed = {"mean": "logit_shift", "variance": "model", "selection": "random", "directions": 8}
    r = client.post("/v1/sessions", json={**base, "method": "refgp", "method_params": mixed})
    assert r.status_code == 201, r.text
    assert r.json()["method"] == "refgp" and r.json()["config"]["method_params"] == mixed
    r = client.post("/v1/sessions", json={**base, "method": "refgp", "method_params": {"variance": "design_loo"}})
    assert r.status_code == 422 and "method_params" in r.text
    r = client.post("/v1/sessions", json={**base, "method": "refgp_v2", "method_params": {"mean": "reference"}})
    assert r.status_code == 422 and "method_params" in r.text
    r = client.post("/v1/sessions", json={**base, "method_params": {"uniform_share": 0.5}})
    assert r.status_code == 201 and r.json()["design"]["uniform_share"] == 0.5


def test_random_is_uniform_with_an_exact_finite_population_interval(client: TestClient) -> None:
    data = upload(client, "designbench6")
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a", "method": "random",
                                          "reference_models": data["refs"], "seed": 2})
    assert r.status_code == 201, r.text
    session = r.json()
    truth = data["truth"]["tgt-a"]
    seen = []
    while session["status"] == "active":
        item = session["next_items"][0]
        seen.append(truth[item])
        session = post(client, session, item, truth[item])
        assert abs(session["estimate"] - sum(seen) / len(seen)) < 1e-12
        assert session["ci"][0] <= session["estimate"] <= session["ci"][1]
    assert session["stop_reason"] == "exhausted" and session["ci"][0] == session["ci"][1] == session["estimate"]


def test_bad_active_design_parameters_are_422(client: TestClient) -> None:
    data = upload(client, "designbench7")
    base = {"benchmark": data["name"], "target": "tgt-a", "reference_models": data["refs"]}
    for params in ({"uniform_share": 0}, {"uniform_share": 2.0}, {"working_model": "x"}, {"point": 3},
                   {"bogus": 1}, {"uniform_share": 0.9, "extrapolation_share": 0.5}):
        r = client.post("/v1/sessions", json={**base, "method_params": params})
        assert r.status_code == 422, (params, r.text)
        assert "method_params" in r.text
    r = client.post("/v1/sessions", json={**base, "method": "bayesame", "method_params": {"uniform_share": 0.5}})
    assert r.status_code == 422
