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
