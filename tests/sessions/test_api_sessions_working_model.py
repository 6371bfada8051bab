"""``active_design``'s working models over HTTP (issue 33 item 4): ``method_params.working_model`` takes
``factor`` and ``prequential``, the response's design says which model answered, and an unknown value is a
located 422 that stores nothing."""

from __future__ import annotations

from fastapi.testclient import TestClient
from test_api_sessions_stop import upload


def test_factor_and_prequential_working_models(client: TestClient) -> None:
    data = upload(client, "workingmodelbench1")
    base = {"benchmark": data["name"], "target": "tgt-a", "reference_models": data["refs"], "seed": 3,
            "max_items": 12}
    truth = data["truth"]["tgt-a"]
    for name in ("factor", "prequential"):
        r = client.post("/v1/sessions", json={**base, "method_params": {"working_model": name}})
        assert r.status_code == 201, r.text
        session = r.json()
        assert session["config"]["method_params"] == {"working_model": name}
        assert session["design"]["working_model"] == name
        while session["status"] == "active":
            item = session["next_items"][0]
            r = client.post(f"/v1/sessions/{session['id']}/observations", json={"item": item, "score": truth[item]})
            assert r.status_code == 200, r.text
            session = r.json()
            lo, hi = session["ci"]
            assert lo <= session["estimate"] <= hi
        design = session["design"]
        assert design["answered_by"] in ("reference_gp_evidence_mix", "factor") and design["factor"]["k"] >= 1
        if name == "factor":
            assert design["answered_by"] == "factor"
        else:
            assert design["n_prequential"] == 12 and set(design["prequential_brier"]) == {
                "reference_gp_evidence_mix", "factor"}


def test_an_unknown_working_model_is_a_located_422(client: TestClient) -> None:
    data = upload(client, "workingmodelbench2")
    before = client.get("/v1/sessions").json()
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a",
                                          "reference_models": data["refs"],
                                          "method_params": {"working_model": "svd"}})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "method_params.working_model"
    assert client.get("/v1/sessions").json() == before


def test_the_factor_fit_is_refused_beyond_its_budget(client: TestClient, monkeypatch) -> None:
    """``factor`` / ``prequential`` fit the factor model inside the create request (248 s at 400 references x
    12,000 items): above ``MAX_FIT_CELLS`` reference scores the request is a located 422 and stores nothing; the
    default working model still takes the same request."""
    from evalplan.sessions import validation

    data = upload(client, "workingmodelbench3")
    monkeypatch.setattr(validation, "MAX_FIT_CELLS", 8 * 80 - 1)  # the 8 references x 80 items, less one
    before = client.get("/v1/sessions").json()
    base = {"benchmark": data["name"], "target": "tgt-a", "reference_models": data["refs"]}
    for name in ("factor", "prequential"):
        r = client.post("/v1/sessions", json={**base, "method_params": {"working_model": name}})
        assert r.status_code == 422, r.text
        problem = r.json()
        assert problem["errors"][0]["field"] == "method_params.working_model"
        assert "640" in problem["detail"] and "fewer reference_models" in problem["detail"]
    assert client.get("/v1/sessions").json() == before
    r = client.post("/v1/sessions", json={**base, "method_params": {"working_model": "reference_gp_evidence_mix"}})
    assert r.status_code == 201, r.text
    monkeypatch.setattr(validation, "MAX_FIT_CELLS", 8 * 80)  # exactly at the budget: allowed
    assert client.post("/v1/sessions", json={**base, "method_params": {"working_model": "factor"}}).status_code == 201
