"""Issue 32 item 9: items the session did not propose are never taken silently. A ``random`` session and a
``stop.anytime_valid`` session (intervals that hold for uniform random draws only) take only the items they
propose: any other is a located 409 naming the proposed items, nothing stored. ``active_design`` (the default)
and the model-based methods accept any not-yet-observed item (API.md); ``active_design`` counts such items as
known exactly, never as a draw, and says how many (``design.n_off_design``). On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from test_api_sessions_stop import upload


def create(client: TestClient, data: dict, **body: object) -> dict:
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a",
                                          "reference_models": data["refs"], "seed": 3, **body})
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def other_item(data: dict, session: dict) -> str:
    return next(i for i in data["items"] if i not in session["next_items"])


@pytest.mark.parametrize("body", [{"method": "random"}, {"method": "random", "stop": {"half_width": 0.05}},
                                  {"method": "bayesame", "stop": {"half_width": 0.05, "anytime_valid": True}},
                                  {"method": "rs_mean", "stop": {"half_width": 0.05, "anytime_valid": True}}])
def test_random_design_sessions_refuse_items_it_did_not_propose(client: TestClient, body: dict) -> None:
    data = upload(client, "offdesign")
    session = create(client, data, **body)
    item = other_item(data, session)
    truth = data["truth"]["tgt-a"]
    r = client.post(f"/v1/sessions/{session['id']}/observations", json={"item": item, "score": truth[item]})
    assert r.status_code == 409, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    error = r.json()["errors"][0]
    assert error["field"] == "observations.0.item" and error["item"] == item
    assert error["proposed"] == session["next_items"] and session["next_items"][0] in r.json()["detail"]
    # all-or-nothing: a proposed item first, the unproposed one second -> nothing stored
    first = session["next_items"][0]
    r = client.post(f"/v1/sessions/{session['id']}/observations",
                    json={"observations": [{"item": first, "score": truth[first]},
                                           {"item": item if item != first else data["items"][-1], "score": 1.0}]})
    after = client.get(f"/v1/sessions/{session['id']}").json()
    stored = client.get(f"/v1/sessions/{session['id']}/observations").json()["items"]
    if r.status_code == 409:
        assert r.json()["errors"][0]["field"] == "observations.1.item"
        assert after["n_observed"] == 0 and stored == [] and after["next_items"] == session["next_items"]
    else:  # the second happened to be what the session proposes next: both taken
        assert r.status_code == 200 and after["n_observed"] == 2


def test_proposed_items_in_one_request_follow_the_design(client: TestClient) -> None:
    """Posting the proposed item and then the one proposed after it, in one request, is accepted and gives
    the same session as posting them one by one."""
    data = upload(client, "offdesign2")
    truth = data["truth"]["tgt-a"]
    one = create(client, data, method="random")
    first = one["next_items"][0]
    one = client.post(f"/v1/sessions/{one['id']}/observations", json={"item": first, "score": truth[first]}).json()
    second = one["next_items"][0]
    one = client.post(f"/v1/sessions/{one['id']}/observations", json={"item": second, "score": truth[second]}).json()
    both = create(client, data, method="random")
    r = client.post(f"/v1/sessions/{both['id']}/observations",
                    json={"observations": [{"item": first, "score": truth[first]},
                                           {"item": second, "score": truth[second]}]})
    assert r.status_code == 200, r.text
    assert r.json()["estimate"] == one["estimate"] and r.json()["next_items"] == one["next_items"]


@pytest.mark.parametrize("method", ["bayesame", "rs_mean", "bayesame_rs"])
def test_model_based_methods_accept_any_unobserved_item(client: TestClient, method: str) -> None:
    """API.md: "Any not-yet-observed item of the benchmark is accepted" (the paper's methods condition on
    what was observed; no design to void)."""
    data = upload(client, "offdesign3")
    session = create(client, data, method=method)
    item = other_item(data, session)
    r = client.post(f"/v1/sessions/{session['id']}/observations",
                    json={"item": item, "score": data["truth"]["tgt-a"][item]})
    assert r.status_code == 200, r.text
    assert r.json()["n_observed"] == 1


def test_active_design_counts_items_it_did_not_propose(client: TestClient) -> None:
    """The default takes an unproposed item as known exactly: no draw, no probability, counted; its proposed
    draw stays proposed, and the design terms are those of the proposed items only."""
    data = upload(client, "offdesign4")
    truth = data["truth"]["tgt-a"]
    session = create(client, data)
    assert session["method"] == "active_design" and session["design"]["n_off_design"] == 0
    proposed = session["next_items"][0]
    item = other_item(data, session)
    r = client.post(f"/v1/sessions/{session['id']}/observations", json={"item": item, "score": truth[item]})
    assert r.status_code == 200, r.text
    after = r.json()
    assert after["design"]["n_off_design"] == 1 and after["design"]["n_design_terms"] == 0
    assert after["next_items"][0] == proposed  # the pending draw is still the one to evaluate
    after = client.post(f"/v1/sessions/{session['id']}/observations",
                        json={"item": proposed, "score": truth[proposed]}).json()
    assert after["design"]["n_off_design"] == 1 and after["n_observed"] == 2
    rows = client.get(f"/v1/sessions/{session['id']}/observations").json()["items"]
    assert {o["item"]: o["off_design"] for o in rows} == {item: True, proposed: False}
    assert client.get(f"/v1/sessions/{session['id']}").json()["design"]["n_off_design"] == 1
