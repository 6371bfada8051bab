"""Issue 33 item 3: the session method table (``GET /v1/sessions/methods``) and a former method name's
``Deprecation`` header, whose ``Link`` resolves to that table (it named ``/docs/SEQUENTIAL.md``, a 404 on the
server). On SQLite and PostgreSQL."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from test_api_sessions_stop import upload

from evalplan.core.sequential import DEFAULT_METHOD
from evalplan.core.sequential.config import PUBLIC_METHODS


def test_former_name_links_to_a_page_that_resolves(client: TestClient) -> None:
    data = upload(client, "methodsbench")
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a", "method": "refgp_v3",
                                          "reference_models": data["refs"], "max_items": 3})
    assert r.status_code == 201, r.text
    assert r.json()["method"] == "refgp" and r.headers["Deprecation"] == "true"
    link = re.fullmatch(r'<([^>]+)>; rel="deprecation"; type="application/json"', r.headers["Link"])
    assert link is not None, r.headers["Link"]
    page = client.get(link.group(1))
    assert page.status_code == 200, page.text
    table = page.json()
    former = {d["name"]: d for d in table["deprecated"]}
    assert former["refgp_v3"]["method"] == "refgp" and former["refgp_v3"]["method_params"] == r.json()[
        "config"]["method_params"]
    assert [m["name"] for m in table["methods"]] and {m["name"] for m in table["methods"]} == set(PUBLIC_METHODS)
    assert table["default"] == DEFAULT_METHOD == "active_design" and table["default_multi_target"] == "bayesame"
    specs = {m["name"]: m for m in table["methods"]}
    assert {"anytime", "fixed_n"} <= set(specs["active_design"]["interval_kinds"])
    assert specs["bayesame"]["multi_target"] and not specs["active_design"]["multi_target"]
    assert specs["random"]["only_proposed_items"] and not specs["bayesame"]["only_proposed_items"]
    # a public name gets no Deprecation header
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a", "method": "refgp",
                                          "reference_models": data["refs"], "max_items": 3})
    assert r.status_code == 201 and "Deprecation" not in r.headers


def test_methods_page_does_not_shadow_sessions(client: TestClient) -> None:
    assert client.get("/v1/sessions/ss_000000000000000000000000").status_code == 404
    assert client.get("/v1/sessions/methods").status_code == 200


def _drive(client: TestClient, body: dict, truth: dict, n: int = 12) -> list[tuple]:
    r = client.post("/v1/sessions", json=body)
    assert r.status_code == 201, r.text
    session = r.json()
    seen = [(session["next_items"], session["estimate"], session["ci"])]
    while session["status"] == "active" and session["n_observed"] < n:
        item = session["next_items"][0]
        session = client.post(f"/v1/sessions/{session['id']}/observations",
                              json={"item": item, "score": truth[item]}).json()
        seen.append((session["next_items"], session["estimate"], session["ci"]))
    return seen


def test_api_md_baselines_answer_under_their_names_and_equal_their_public_spelling(client: TestClient) -> None:
    """rs_mean = random + {interval: paper_normal}, bayesame_rs = bayesame + {selection: random}: API.md's names
    answer as before (method, config) with a Deprecation header whose link resolves; the public spelling gives the
    same items and numbers."""
    data = upload(client, "methodsbench2")
    truth = data["truth"]["tgt-a"]
    base = {"benchmark": data["name"], "target": "tgt-a", "reference_models": data["refs"], "seed": 3}
    for former, public, params in (("rs_mean", "random", {"interval": "paper_normal"}),
                                   ("bayesame_rs", "bayesame", {"selection": "random"})):
        r = client.post("/v1/sessions", json={**base, "method": former, "max_items": 3})
        assert r.status_code == 201, r.text
        assert r.json()["method"] == r.json()["config"]["method"] == former
        assert r.json()["config"]["method_params"] is None and r.headers["Deprecation"] == "true"
        link = re.fullmatch(r'<([^>]+)>; rel="deprecation"; type="application/json"', r.headers["Link"])
        assert link is not None and client.get(link.group(1)).status_code == 200
        old = _drive(client, {**base, "method": former}, truth)
        new = _drive(client, {**base, "method": public, "method_params": params}, truth)
        assert len(old) > 5 and old == new
    r = client.post("/v1/sessions", json={**base, "method": "rs_mean", "method_params": {"interval": "paper_normal"}})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "method_params"
    r = client.post("/v1/sessions", json={**base, "method": "random", "hyperparameters": {"alpha": 2.0},
                                          "method_params": {"interval": "paper_normal"}})
    assert r.status_code == 201, r.text


def test_method_params_are_typed_and_errors_name_the_key(client: TestClient) -> None:
    data = upload(client, "methodsbench3")
    base = {"benchmark": data["name"], "target": "tgt-a", "reference_models": data["refs"], "max_items": 3}
    cases = [({"method_params": {"uniform_share": 2}}, "method_params.uniform_share", "less than or equal to 1"),
             ({"method_params": {"bogus": 1}}, "method_params.bogus", "unknown key for active_design"),
             ({"method_params": {"uniform_share": 0.9}}, "method_params.extrapolation_share", ">= uniform_share"),
             ({"method": "bayesame", "method_params": {"uniform_share": 0.5}}, "method_params.uniform_share",
              "unknown key for bayesame"),
             ({"method": "random", "method_params": {"interval": "exact"}}, "method_params.interval", "paper_normal"),
             ({"targets": ["tgt-a", "tgt-b"], "target": None, "method_params": {"selection": "x"}},
              "method_params.selection", "information_gain"),
             ({"method_params": [1]}, "method_params", "dictionary")]
    for extra, field, words in cases:
        r = client.post("/v1/sessions", json={**base, **extra})
        assert r.status_code == 422, (extra, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["errors"][0]["field"] == field and words in r.json()["errors"][0]["detail"], r.json()
    r = client.post("/v1/sessions", json={**base, "method_params": {"working_model": "refgp_ivr", "extrapolation_share": 1}})
    assert r.status_code == 201, r.text  # a former working-model value, answered under its readable name
    assert r.json()["config"]["method_params"] == {"working_model": "reference_gp", "extrapolation_share": 1.0}
    assert r.json()["design"]["working_model"] == "reference_gp"
    schema = client.get("/openapi.json").json()
    field = schema["components"]["schemas"]["SessionCreate"]["properties"]["method_params"]
    refs = {m["$ref"].rsplit("/", 1)[1] for m in field["anyOf"][0]["oneOf"]}
    assert refs == {"ActiveDesignParams", "RandomParams", "BayesAMEParams", "RefGPParams", "ProEvalBQParams",
                    "FluidIRTParams"} and field["x-discriminator"] == "method"
    assert schema["components"]["schemas"]["ActiveDesignParams"]["additionalProperties"] is False
