"""Issue 32 items 4-7: a published (shared) coreset used by two teams, in production mode (auth required).

* 4: the first predict by the other team answered 500 (``KeyError`` in ``score_predictions.predict_many``)
  and cached an empty state that broke the owner's predicts too: predict answers both teams, the same
  numbers, whoever comes first (after publish and after a restart, i.e. empty caches);
* 5: another team's views of the coreset (JSON, list, page, plot, every export) hold no name of the
  owner's private models, only their count; its chart shows the coreset's items and the references'
  held-out predictions under anonymous labels;
* 6: a batch predict (``models``) resolves a name to the caller's own model first, as ``model`` does;
* 7: ``model`` with posted ``scores`` labels the prediction with the name sent, registered or not, for
  any team, and registers nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from evalplan.coresets import predict as coreset_predict
from evalplan.coresets.families import score_predictions
from evalplan.main import create_app
from evalplan.workers.dispatch import InProcessDispatcher
from support.helpers import assert_problem, settings_for, upload_matrix, wait_for_job
from support.teams import ADMIN_TOKEN, Teams, make_teams

MODELS = [f"alpha-m{i}" for i in range(12)]
ITEMS = [f"q{j}" for j in range(30)]


@pytest.fixture
def shared_app(committed_session_factory: sessionmaker[Session], database_urls: dict[str, str],
               backend: str) -> Iterator[FastAPI]:
    dispatcher = InProcessDispatcher(committed_session_factory, threads=2)
    yield create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN),
                     session_factory=committed_session_factory, dispatcher=dispatcher)
    dispatcher.shutdown()


def restart() -> None:
    """What a process restart does to predict: its caches of parsed coreset state are empty."""
    score_predictions._PREPARED.clear()
    coreset_predict._CELLS.clear()


def alpha_coreset(a: TestClient, *, publish: bool, name: str = "gsm-core") -> tuple[str, list[dict[str, Any]]]:
    """Alpha's private benchmark ``gsm`` and a score-based coreset on it (references m0..m9, m10 and m11 held
    out), published or not; (its id, posted scores of a target on its items)."""
    if a.get("/v1/benchmarks/gsm").status_code == 404:
        rng = np.random.default_rng(0)
        values = (rng.random((12, 30)) < rng.uniform(0.2, 0.8, (12, 1))).astype(float)
        upload_matrix(a, "gsm", values, MODELS, ITEMS)
    r = a.post("/v1/coresets", json={"name": name, "method": "anchor_points", "benchmarks": ["gsm"], "budget": 6,
                                     "reference_models": MODELS[:10]})
    assert r.status_code == 202, r.text
    assert wait_for_job(a, r.json()["job"]["id"], timeout=120)["status"] == "succeeded"
    cid = r.json()["coreset"]["id"]
    if publish:
        assert a.post(f"/v1/coresets/{cid}/publish").status_code == 200
    chosen = a.get(f"/v1/coresets/{cid}/export", params={"format": "inspect"}).json()["gsm"]
    posted = [{"benchmark": "gsm", "item": item, "score": float(k % 2)} for k, item in enumerate(chosen)]
    return cid, posted


def estimates(response: Any) -> tuple[Any, Any]:
    assert response.status_code == 200, response.text
    body = response.json()
    return body["benchmarks"], body["overall"]


def test_predict_answers_both_teams_whoever_comes_first(shared_app: FastAPI) -> None:
    teams = make_teams(shared_app)
    try:
        a, b = teams.a, teams.b
        cid, posted = alpha_coreset(a, publish=True)
        restart()
        theirs = b.post(f"/v1/coresets/{cid}/predict", json={"scores": posted})  # before: 500 KeyError
        mine = a.post(f"/v1/coresets/{cid}/predict", json={"scores": posted})  # before: 500 (poisoned cache)
        assert estimates(theirs) == estimates(mine)
        stored = a.post(f"/v1/coresets/{cid}/predict", json={"models": ["alpha-m10", "alpha-m11"]})
        assert stored.status_code == 200, stored.text
        restart()  # the other order, after a restart: the same numbers
        assert estimates(a.post(f"/v1/coresets/{cid}/predict", json={"scores": posted})) == estimates(mine)
        assert estimates(b.post("/v1/coresets/alpha%2Fgsm-core@1/predict", json={"scores": posted})) == \
            estimates(mine)
        restart()  # the other team's batch predict first: its own (missing) models are 404, the owner unharmed
        missing = assert_problem(b.post(f"/v1/coresets/{cid}/predict", json={"models": ["alpha-m10"]}), 404)
        assert missing["errors"][0]["field"] == "models[0]"
        assert a.post(f"/v1/coresets/{cid}/predict", json={"models": ["alpha-m10", "alpha-m11"]}).json() == \
            stored.json()
    finally:
        teams.close()


def test_a_public_unpublished_coreset_on_a_private_benchmark_is_a_located_4xx_for_another_team(
        shared_app: FastAPI) -> None:
    """Made public without publishing, a coreset does not share its private benchmark's items: the other team's
    predict says its posted items are not in the coreset (422), never 500; the owner's predicts are unharmed."""
    teams = make_teams(shared_app)
    try:
        a, b = teams.a, teams.b
        cid, posted = alpha_coreset(a, publish=False)
        assert a.patch(f"/v1/coresets/{cid}", json={"visibility": "public"}).status_code == 200
        restart()
        refused = assert_problem(b.post(f"/v1/coresets/{cid}/predict", json={"scores": posted}), 422)
        assert refused["errors"][0]["row"] == 0
        assert a.post(f"/v1/coresets/{cid}/predict", json={"scores": posted}).status_code == 200
    finally:
        teams.close()


def test_batch_predict_resolves_the_callers_own_model_first(shared_app: FastAPI) -> None:
    teams = make_teams(shared_app)
    try:
        a, b = teams.a, teams.b
        cid, _ = alpha_coreset(a, publish=True)
        # beta's public model with the name of alpha's held-out model (no scores on alpha's benchmark)
        assert b.post("/v1/models", json={"name": "alpha-m11", "visibility": "public"}).status_code == 201
        single = a.post(f"/v1/coresets/{cid}/predict", json={"model": "alpha-m11"})
        batch = a.post(f"/v1/coresets/{cid}/predict", json={"models": ["alpha-m10", "alpha-m11"]})
        assert batch.status_code == 200, batch.text  # before: 422, beta's model (no stored scores) was picked
        assert batch.json()["predictions"][1]["benchmarks"] == single.json()["benchmarks"]
        # beta's own model comes first for beta, on either path: it has no scores on the coreset's items
        for body in ({"model": "alpha-m11"}, {"models": ["alpha-m11"]}):
            assert "no stored scores" in assert_problem(b.post(f"/v1/coresets/{cid}/predict", json=body),
                                                        422)["detail"]
        # team/name names the other team's model on both paths
        both = a.post(f"/v1/coresets/{cid}/predict", json={"models": ["beta%2Falpha-m11"]})
        assert "no stored scores" in assert_problem(both, 422)["detail"]
    finally:
        teams.close()


def test_posted_scores_are_labelled_with_the_model_name_sent(shared_app: FastAPI) -> None:
    teams = make_teams(shared_app)
    try:
        a, b = teams.a, teams.b
        cid, posted = alpha_coreset(a, publish=True)
        anonymous = a.post(f"/v1/coresets/{cid}/predict", json={"scores": posted})
        for client in (a, b):
            got = client.post(f"/v1/coresets/{cid}/predict", json={"model": "brand-new-ckpt", "scores": posted})
            assert got.status_code == 200, got.text  # before: 404 model 'brand-new-ckpt' does not exist
            assert got.json()["model"] == "brand-new-ckpt"
            assert estimates(got) == estimates(anonymous)
            assert client.get("/v1/models/brand-new-ckpt").status_code == 404  # predict registers nothing
        # an existing model's name labels posted scores too (the posted scores are used, not its stored ones)
        labelled = a.post(f"/v1/coresets/{cid}/predict", json={"model": "alpha-m3", "scores": posted})
        assert labelled.json()["model"] == "alpha-m3" and estimates(labelled) == estimates(anonymous)
        # without scores the model must exist (and be readable)
        assert_problem(b.post(f"/v1/coresets/{cid}/predict", json={"model": "brand-new-ckpt"}), 404)
    finally:
        teams.close()


def beta_views(teams: Teams, cid: str) -> dict[str, str]:
    """Everything team beta can read of coreset ``cid``, as text."""
    b = teams.b
    views = {"json": b.get(f"/v1/coresets/{cid}"), "list": b.get("/v1/coresets"),
             "page": b.get(f"/ui/coresets/{cid}"), "svg": b.get(f"/v1/coresets/{cid}/plot.svg"),
             "diff": b.get(f"/v1/coresets/{cid}/diff", params={"against": cid})}
    for fmt in ("csv", "jsonl", "inspect"):
        views[fmt] = b.get(f"/v1/coresets/{cid}/export", params={"format": fmt})
    for name, response in views.items():
        assert response.status_code == 200, (name, response.text[:300])
    return {name: response.text for name, response in views.items()}


def test_another_team_sees_counts_not_private_model_names(shared_app: FastAPI) -> None:
    teams = make_teams(shared_app)
    try:
        a = teams.a
        cid, _ = alpha_coreset(a, publish=True)
        owner = a.get(f"/v1/coresets/{cid}").json()
        assert owner["diagnostics"]["reference_models"] == MODELS[:10]  # the owner sees every name
        views = beta_views(teams, cid)
        for name, text in views.items():
            assert "alpha-m" not in text, (name, text[text.find("alpha-m") - 200:text.find("alpha-m") + 100])
        seen = teams.b.get(f"/v1/coresets/{cid}").json()
        assert seen["reference_models"] == [] and seen["provenance"]["reference_models"] == []
        assert seen["diagnostics"]["n_references"] == 10 and seen["diagnostics"]["reference_models_withheld"] == 10
        assert seen["n_items"] == 6 and seen["items"] == owner["items"]
        # the chart shows what beta may see: 6 items over 1 benchmark (before: "0 items over 0 benchmarks"), and
        # the references' held-out predictions, labelled anonymously
        assert "6 items over 1 benchmarks" in views["svg"] and "0 items over 0" not in views["svg"]
        assert "10 model-benchmark pairs" in views["svg"]  # before: no reference chart for beta
        # a model alpha made public is readable anyway, so it is named
        assert a.patch("/v1/models/alpha-m0", json={"visibility": "public"}).status_code == 200
        seen = teams.b.get(f"/v1/coresets/{cid}").json()
        assert seen["reference_models"] == ["alpha-m0"]
        assert seen["diagnostics"]["reference_models_withheld"] == 9
        assert "alpha-m1" not in teams.b.get(f"/ui/coresets/{cid}").text
    finally:
        teams.close()
