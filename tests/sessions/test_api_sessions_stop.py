"""Precision stopping over HTTP (API.md "Sessions: precision stopping and the default method"):
``stop``, ``level``, ``max_items: {"fraction": f}``, ``anytime_valid``, on SQLite and PostgreSQL."""

from __future__ import annotations

import math

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from evalplan.core.sequential.stopping import BettingCS
from evalplan.db.models import EvalSession
from support.helpers import create_benchmark, upload_items, upload_score_cells

N_ITEMS, N_REFS = 80, 8


def upload(client: TestClient, name: str = "stopbench", **bench: object) -> dict:
    rng = np.random.default_rng(5)
    difficulty = rng.normal(0, 1.2, N_ITEMS)
    ability = np.linspace(-1.5, 1.5, N_REFS + 2)
    scores = (rng.random((N_REFS + 2, N_ITEMS)) < 1 / (1 + np.exp(-(ability[:, None] - difficulty)))).astype(float)
    items = [f"q{j:02d}" for j in range(N_ITEMS)]
    names = [f"ref-{i}" for i in range(N_REFS)] + ["tgt-a", "tgt-b"]
    create_benchmark(client, name, **({"score_kind": "binary"} | bench))
    upload_items(client, name, [{"id": i, "prompt": f"question {i}"} for i in items])
    upload_score_cells(client, name, [{"model": names[i], "item": items[j], "score": scores[i, j]}
                                      for i in range(len(names)) for j in range(N_ITEMS)])
    truth = {n: dict(zip(items, scores[i].tolist())) for i, n in enumerate(names)}
    return {"name": name, "items": items, "truth": truth,
            "refs": [f"ref-{i}" for i in range(N_REFS)]}


def run(client: TestClient, session: dict, truth: dict) -> list[dict]:
    bodies = [session]
    while session["status"] == "active":
        item = session["next_items"][0]
        r = client.post(f"/v1/sessions/{session['id']}/observations", json={"item": item, "score": truth[item]})
        assert r.status_code == 200, r.text
        session = r.json()
        bodies.append(session)
    return bodies


def test_precision_stop_level_and_ci(client: TestClient) -> None:
    data = upload(client)
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a", "method": "rs_mean",
                                          "reference_models": data["refs"],
                                          "stop": {"half_width": 0.15, "level": 0.9, "min_items": 5}})
    assert r.status_code == 201, r.text
    session = r.json()
    assert session["level"] == 0.9
    assert session["config"]["stop"] == {"half_width": 0.15, "level": 0.9, "min_items": 5, "anytime_valid": False}
    bodies = run(client, session, data["truth"]["tgt-a"])
    last = bodies[-1]
    assert last["stop_reason"] == "precision" and last["n_observed"] >= 5
    lo, hi = last["ci"]
    assert (hi - lo) / 2 <= 0.15
    for b in bodies[:-1]:  # no earlier stop
        assert b["n_observed"] < 5 or (b["ci"][1] - b["ci"][0]) / 2 > 0.15
    for b in bodies:
        assert 0.0 <= b["ci"][0] <= b["estimate"] <= b["ci"][1] <= 1.0 and b["level"] == 0.9
    # rs_mean's 90% interval: the sample mean +- z_0.95 sqrt(var)
    z = 1.6448536269514722
    assert last["ci"][1] - last["estimate"] == min(z * math.sqrt(last["variance"]), 1 - last["estimate"]) or \
        abs(last["ci"][1] - last["estimate"] - z * math.sqrt(last["variance"])) < 1e-12
    trajectory = client.get(f"/v1/sessions/{last['id']}/trajectory").json()
    assert trajectory[-1]["ci"] == last["ci"] and len(trajectory) == last["n_observed"]


def test_half_width_zero_and_fraction_budget(client: TestClient) -> None:
    data = upload(client)
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-b", "method": "bayesame_rs",
                                          "reference_models": data["refs"], "stop": {"half_width": 0, "min_items": 1},
                                          "max_items": {"fraction": 0.1}})
    assert r.status_code == 201, r.text
    session = r.json()
    assert session["config"]["max_items"] == 8 and session["config"]["max_items_fraction"] == 0.1
    last = run(client, session, data["truth"]["tgt-b"])[-1]
    assert last["stop_reason"] == "max_items" and last["n_observed"] == 8


def test_anytime_valid_ci_is_the_betting_cs(client: TestClient) -> None:
    data = upload(client)
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a",
                                          "reference_models": data["refs"],
                                          "stop": {"half_width": 0.2, "anytime_valid": True}, "seed": 3,
                                          "method": "rs_mean"})  # active_design (the default) has its own CS
    assert r.status_code == 201, r.text
    bodies = run(client, r.json(), data["truth"]["tgt-a"])
    cs = BettingCS(N_ITEMS, 0.95)
    for before, body in zip(bodies, bodies[1:]):
        cs.update(data["truth"]["tgt-a"][before["next_items"][0]])
        assert body["ci"] == list(cs.interval())
        assert body["ci"][0] <= body["estimate"] <= body["ci"][1]
    assert bodies[-1]["stop_reason"] == "precision"


def test_multi_target_precision_stop(client: TestClient) -> None:
    data = upload(client)
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "targets": ["tgt-a", "tgt-b"],
                                          "reference_models": data["refs"], "refit_every": 0,
                                          "stop": {"half_width": 0.25, "min_items": 4, "level": 0.8}})
    assert r.status_code == 201, r.text
    session = r.json()
    while session["status"] == "active":
        nxt = session["next"][0]
        r = client.post(f"/v1/sessions/{session['id']}/observations",
                        json={"target": nxt["target"], "item": nxt["item"],
                              "score": data["truth"][nxt["target"]][nxt["item"]]})
        assert r.status_code == 200, r.text
        session = r.json()
    assert session["stop_reason"] == "precision" and session["level"] == 0.8
    for state in session["per_target"].values():
        lo, hi = state["ci"]
        assert state["stop_reason"] == "precision" and (hi - lo) / 2 <= 0.25 and 0 <= lo <= hi <= 1
        assert state["n_observed"] >= 4


def test_bad_stop_values_are_422_naming_the_field(client: TestClient) -> None:
    data = upload(client)
    base = {"benchmark": data["name"], "target": "tgt-a", "reference_models": data["refs"]}
    cases = [
        ({"stop": {"half_width": -0.1}}, "stop.half_width"),
        ({"stop": {"level": 0.9}}, "stop.half_width"),
        ({"stop": {"half_width": "wide"}}, "stop.half_width"),
        ({"stop": {"half_width": 0.02, "level": 1.5}}, "stop.level"),
        ({"stop": {"half_width": 0.02, "level": 0.0}}, "stop.level"),
        ({"stop": {"half_width": 0.02, "min_items": 0}}, "stop.min_items"),
        ({"stop": {"half_width": 0.02, "anytime_valid": "yes"}}, "stop.anytime_valid"),
        ({"stop": {"half_width": 0.02, "eps": 1}}, "stop.eps"),
        ({"stop": 0.02}, "stop"),
        ({"stop": {"half_width": 0.02}, "epsilon2": 0.01}, "epsilon2"),
        ({"stop": {"half_width": 0.02, "level": 0.9}, "level": 0.8}, "level"),
        ({"level": 1.2}, "level"),
        ({"max_items": {"fraction": 0}}, "max_items.fraction"),
        ({"max_items": {"fraction": 1.5}}, "max_items.fraction"),
        ({"max_items": {"share": 0.5}}, "max_items"),
        ({"max_items": "ten"}, "max_items"),
        ({"max_items": 0}, "max_items"),
        ({"targets": ["tgt-a", "tgt-b"], "target": None, "stop": {"half_width": 0.1, "anytime_valid": True}},
         "stop.anytime_valid"),
    ]
    for extra, field in cases:
        body = {**base, **extra}
        if body.get("target") is None:
            body.pop("target")
        r = client.post("/v1/sessions", json=body)
        assert r.status_code == 422, (extra, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        fields = [e.get("field") or "" for e in r.json()["errors"]]
        assert any(f == field or f.startswith(field + ".") for f in fields), (extra, fields)
    upload(client, "unbounded", score_kind="continuous", score_min=None, score_max=None)
    r = client.post("/v1/sessions", json={**base, "benchmark": "unbounded", "stop": {"half_width": 0.1,
                                                                                     "anytime_valid": True}})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "stop.anytime_valid", r.text
    with client.app.state.session_factory() as s:
        assert s.scalar(select(func.count()).select_from(EvalSession)) == 0


def test_default_method_at_another_level(client: TestClient) -> None:
    """The default method (``active_design``) at ``level: 0.9``: its working model's inner configuration used to
    carry a 0.95 stop, so every such session was refused (``stop.level: 0.95 differs from level 0.9``)."""
    data = upload(client)
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "tgt-a", "level": 0.9,
                                          "reference_models": data["refs"],
                                          "stop": {"half_width": 0.15, "level": 0.9, "min_items": 5}})
    assert r.status_code == 201, r.text
    session = r.json()
    assert session["method"] == "active_design" and session["level"] == 0.9
    last = run(client, session, data["truth"]["tgt-a"])[-1]
    assert last["level"] == 0.9 and last["n_observed"] >= 5
    lo, hi = last["ci"]
    assert 0.0 <= lo <= last["estimate"] <= hi <= 1.0
