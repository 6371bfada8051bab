"""Issue 24 item 6: sharing a published coreset, walked as team beta would use it.

The rule: publishing a version freezes it and shares it with every team, together with everything a
predict or export needs (its items' ids and content, its predictor and frozen state), whatever the
visibility of the benchmark it came from; the rest of that benchmark stays private. A published version
cannot be made private again (409). ``name@version`` without a team resolves the caller's own series
first, then the one other team's published series of that name (two: 409 listing ``team/name@v``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from evalplan.main import create_app
from evalplan.workers.dispatch import InProcessDispatcher
from support.helpers import assert_problem, settings_for, upload_matrix, wait_for_job
from support.teams import ADMIN_TOKEN, make_teams


@pytest.fixture
def walk_app(committed_session_factory: sessionmaker[Session], database_urls: dict[str, str],
             backend: str) -> Iterator[FastAPI]:
    dispatcher = InProcessDispatcher(committed_session_factory, threads=2)
    yield create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN),
                     session_factory=committed_session_factory, dispatcher=dispatcher)
    dispatcher.shutdown()


@pytest.mark.slow
def test_team_beta_uses_alphas_published_coreset_while_the_benchmark_stays_private(walk_app: FastAPI) -> None:
    teams = make_teams(walk_app)
    try:
        a, b = teams.a, teams.b
        rng = np.random.default_rng(0)
        values = (rng.random((12, 30)) < rng.uniform(0.2, 0.8, (12, 1))).astype(float)
        models, items = [f"alpha-m{i}" for i in range(12)], [f"q{j}" for j in range(30)]
        upload_matrix(a, "gsm", values, models, items)
        r = a.post("/v1/coresets", json={"name": "gsm-core", "method": "anchor_points", "benchmarks": ["gsm"],
                                         "budget": 6, "reference_models": models[:10]})
        assert r.status_code == 202, r.text
        assert wait_for_job(a, r.json()["job"]["id"], timeout=120)["status"] == "succeeded"
        cid = r.json()["coreset"]["id"]
        assert b.get(f"/v1/coresets/{cid}").status_code == 404  # unpublished: alpha's own
        published = a.post(f"/v1/coresets/{cid}/publish")
        assert published.status_code == 200 and published.json()["visibility"] == "public", published.text
        assert a.get("/v1/benchmarks/gsm").json()["visibility"] == "private"

        for ref in (cid, "gsm-core@1", "gsm-core@latest", "alpha%2Fgsm-core@1"):
            got = b.get(f"/v1/coresets/{ref}")
            assert got.status_code == 200, (ref, got.text)
            assert got.json()["id"] == cid and got.json()["n_items"] == 6, (ref, got.json())
        for fmt in ("jsonl", "csv", "inspect"):
            export = b.get(f"/v1/coresets/{cid}/export", params={"format": fmt})
            assert export.status_code == 200 and export.text == a.get(f"/v1/coresets/{cid}/export",
                                                                       params={"format": fmt}).text, fmt
            assert "q" in export.text
        assert b.get(f"/ui/coresets/{cid}").status_code == 200
        assert b.get(f"/v1/coresets/{cid}/plot.svg").status_code == 200
        chosen = a.get(f"/v1/coresets/{cid}/export", params={"format": "inspect"}).json()["gsm"]
        posted = [{"benchmark": "gsm", "item": i, "score": 1.0} for i in chosen]
        mine = a.post(f"/v1/coresets/{cid}/predict", json={"scores": posted})
        theirs = b.post("/v1/coresets/gsm-core@1/predict", json={"scores": posted})
        assert mine.status_code == 200 and theirs.status_code == 200, theirs.text  # before: 500 KeyError
        assert theirs.json()["benchmarks"] == mine.json()["benchmarks"]
        assert theirs.json()["overall"] == mine.json()["overall"]
        # what is missing is said: beta's model has no scores on those items
        assert b.post("/v1/models", json={"name": "beta-model"}).status_code == 201
        missing = assert_problem(b.post(f"/v1/coresets/{cid}/predict", json={"model": "beta-model"}), 422)
        assert "no stored scores" in missing["detail"]
        # the rest of the benchmark stays private; the version stays alpha's and public
        assert b.get("/v1/benchmarks/gsm").status_code == 404
        assert b.get("/v1/benchmarks/alpha%2Fgsm/items").status_code == 404
        assert_problem(a.patch(f"/v1/coresets/{cid}", json={"visibility": "private"}), 409)
        assert_problem(b.post(f"/v1/coresets/{cid}/deprecate", json={"message": "no"}), 403)
        # every read route of a coreset answers beta (the walk, on the published version)
        walked = 0
        for path, item in walk_app.openapi()["paths"].items():
            if "{coreset_id}" not in path:
                continue
            for method, op in item.items():
                scope = op.get("x-evalplan-scope") or ("read" if method == "get" else "write")
                if scope != "read" or method != "get":
                    continue
                url = path.replace("{coreset_id}", cid).replace("{fmt}", "svg")
                params = {"against": cid} if path.endswith("/diff") else None
                resp = b.get(url, params=params)
                walked += 1
                assert resp.status_code == 200, (url, resp.status_code, resp.text[:200])
        assert walked >= 4
        # a second team sharing a series of the same name: the bare name is ambiguous for a third party
        upload_matrix(b, "gsm-b", values, [f"beta-m{i}" for i in range(12)], items)
        r = b.post("/v1/coresets", json={"name": "gsm-core", "method": "random", "benchmarks": ["gsm-b"],
                                         "budget": 5})
        assert wait_for_job(b, r.json()["job"]["id"], timeout=120)["status"] == "succeeded"
        assert b.get("/v1/coresets/gsm-core@1").json()["team"] == "beta"  # own first
        assert b.post(f"/v1/coresets/{r.json()['coreset']['id']}/publish").status_code == 200
        body = assert_problem(teams.admin.get("/v1/coresets/gsm-core@1"), 409)
        assert body["errors"][0]["candidates"] == ["alpha/gsm-core@1", "beta/gsm-core@1"]
        assert teams.admin.get("/v1/coresets/alpha%2Fgsm-core@1").json()["id"] == cid
    finally:
        teams.close()
