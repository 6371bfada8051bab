"""``previous: [model names]`` on POST /v1/sessions (issue 11 §5): earlier checkpoints' scores, stored
or observed in earlier sessions, join the prior with a weight (evalplan.core.sequential.checkpoints); the
numbers equal a local estimator on that prior; bad values are 422 naming ``previous.<k>``."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from evalplan.core.sequential import BucketPrior, SequentialEstimator, SessionConfig
from evalplan.core.sequential.checkpoints import with_previous
from evalplan.core.sequential.stopping import PrecisionSession
from evalplan.db.models import EvalSession
from support.helpers import create_benchmark, upload_items, upload_score_cells

N_ITEMS, N_REFS = 80, 8


def make(seed: int = 9) -> dict:
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1.2, N_ITEMS)
    ability = np.linspace(-1.5, 1.5, N_REFS)
    refs = (rng.random((N_REFS, N_ITEMS)) < 1 / (1 + np.exp(-(ability[:, None] - difficulty)))).astype(float)
    final = (rng.random(N_ITEMS) < 1 / (1 + np.exp(-(0.8 - difficulty)))).astype(float)
    ckpts = []
    for flip in (0.3, 0.1):  # a training run: each checkpoint differs from the final one on fewer items
        c = final.copy()
        where = rng.random(N_ITEMS) < flip
        c[where] = 1 - c[where]
        ckpts.append(c)
    return {"refs": refs, "final": final, "ckpts": ckpts, "items": [f"q{j:02d}" for j in range(N_ITEMS)]}


def upload(client: TestClient, data: dict, name: str = "run") -> None:
    create_benchmark(client, name, score_kind="binary")
    upload_items(client, name, [{"id": i, "prompt": f"question {i}"} for i in data["items"]])
    cells = [{"model": f"ref-{i}", "item": data["items"][j], "score": data["refs"][i, j]}
             for i in range(N_REFS) for j in range(N_ITEMS)]
    cells += [{"model": "ckpt-1", "item": data["items"][j], "score": data["ckpts"][0][j]} for j in range(N_ITEMS)]
    upload_score_cells(client, name, cells)


def test_previous_checkpoints_inform_the_prior(client: TestClient) -> None:
    data = make()
    upload(client, data)
    items = data["items"]
    # ckpt-2 has no stored scores: 30 items observed in an earlier session count
    r = client.post("/v1/sessions", json={"benchmark": "run", "target": "ckpt-2", "method": "rs_mean",
                                          "reference_models": [f"ref-{i}" for i in range(N_REFS)],
                                          "max_items": 30})
    assert r.status_code == 201, r.text
    early = r.json()
    while early["status"] == "active":
        item = early["next_items"][0]
        early = client.post(f"/v1/sessions/{early['id']}/observations",
                            json={"item": item, "score": data["ckpts"][1][items.index(item)]}).json()
    assert early["n_observed"] == 30

    r = client.post("/v1/sessions", json={"benchmark": "run", "target": "ckpt-3", "method": "bayesame",
                                          "previous": ["ckpt-1", "ckpt-2"], "stop": {"half_width": 0.05}})
    assert r.status_code == 201, r.text
    session = r.json()
    assert session["previous"] == ["ckpt-1", "ckpt-2"]
    assert sorted(session["reference_models"]) == [f"ref-{i}" for i in range(N_REFS)]  # checkpoints are not refs
    prev = session["config"]["previous"]
    assert [(p["model"], p["n_scores"]) for p in prev] == [("ckpt-1", N_ITEMS), ("ckpt-2", 30)]

    # the same numbers from a local estimator on the augmented prior
    ck2 = np.full(N_ITEMS, np.nan)
    obs = client.get(f"/v1/sessions/{early['id']}/observations", params={"limit": 100}).json()["items"]
    for o in obs:
        ck2[items.index(o["item"])] = o["score"]
    matrix, mult = with_previous(data["refs"], [data["ckpts"][0], ck2])
    assert [p["weight"] for p in prev] == mult and mult[1] > 1
    config = SessionConfig(**session["config"])
    local = PrecisionSession(SequentialEstimator(BucketPrior.from_reference_scores(matrix), config),
                             rule=config.stop_rule, score_range=(0.0, 1.0))
    for _ in range(12):
        assert session["next_items"] == [items[j] for j in local.propose()]
        item = session["next_items"][0]
        score = data["final"][items.index(item)]
        session = client.post(f"/v1/sessions/{session['id']}/observations", json={"item": item, "score": score}).json()
        local.observe(items.index(item), score)
        assert session["estimate"] == pytest.approx(local.estimate, abs=1e-12)
        assert session["ci"] == pytest.approx(list(local.ci), abs=1e-12)

    # without previous: another prior, other numbers
    plain = client.post("/v1/sessions", json={"benchmark": "run", "target": "ckpt-3", "method": "bayesame"}).json()
    assert "ckpt-1" not in plain["reference_models"] or plain["previous"] is None
    assert plain["estimate"] != pytest.approx(session["estimate"])


def test_bad_previous_is_422_naming_the_field(client: TestClient) -> None:
    upload(client, make())
    assert client.post("/v1/models", json={"name": "unscored"}).status_code == 201
    base = {"benchmark": "run", "target": "ckpt-3"}
    cases = [
        ({"previous": ["ghost"]}, "previous.0"),
        ({"previous": ["ckpt-1", "ckpt-3"]}, "previous.1"),
        ({"previous": ["ckpt-1", "ckpt-1"]}, "previous.1"),
        ({"previous": ["unscored"]}, "previous.0"),
        ({"previous": []}, "previous"),
        ({"previous": ["ckpt-1"], "reference_models": ["ref-0", "ckpt-1"]}, "reference_models.1"),
        ({"previous": "ckpt-1"}, "previous"),
    ]
    for extra, field in cases:
        r = client.post("/v1/sessions", json={**base, **extra})
        assert r.status_code == 422, (extra, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert field in [e.get("field") for e in r.json()["errors"]], (extra, r.json())
    with client.app.state.session_factory() as s:
        assert s.scalar(select(func.count()).select_from(EvalSession)) == 0


def test_the_default_keeps_previous_in_its_prior_only(client: TestClient) -> None:
    """The default (``active_design``) runs with ``previous`` in its prior; the checkpoint flip model of issue 33
    item 2 is opt-in (``use_previous=True`` in the core), measured no better (docs/RESULTS.md "Checkpoint series"),
    so the response carries no ``design.previous_model``."""
    data = make()
    upload(client, data)
    items = data["items"]
    r = client.post("/v1/sessions", json={"benchmark": "run", "target": "ckpt-3", "previous": ["ckpt-1"],
                                          "reference_models": [f"ref-{i}" for i in range(N_REFS)]})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["method"] == "active_design"
    for _ in range(12):
        item = body["next_items"][0]
        body = client.post(f"/v1/sessions/{body['id']}/observations",
                           json={"item": item, "score": data["final"][items.index(item)]}).json()
    assert body["n_observed"] == 12
    assert "previous_model" not in body["design"]
    assert [p["model"] for p in body["config"]["previous"]] == ["ckpt-1"]
