"""Sequential sessions over HTTP (API.md "Sequential sessions"), on SQLite and PostgreSQL.

Every response is checked against a fresh ``SequentialEstimator`` fed the same data in the test, so
the service adds storage, validation and concurrency, and never changes the numbers.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from evalplan.core.sequential import (
    DEFAULT_METHOD,
    METHODS,
    BucketPrior,
    SequentialEstimator,
    SessionConfig,
    make_estimator,
)
from evalplan.core.sequential.methods import ALIASES, answered_name
from evalplan.db.models import EvalSession, SessionObservation, SessionPrior
from evalplan.main import create_app
from evalplan.sessions.cache import clear_caches
from support.helpers import NoJobsDispatcher, create_benchmark, settings_for, upload_items, upload_score_cells

N_ITEMS = 60
N_REFS = 8
TARGET = "target-ckpt"


def make_data(seed: int = 0) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """Item ids, reference names, reference scores (with ~5% missing) and the target's scores."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1.2, N_ITEMS)
    ability = np.linspace(-1.5, 1.5, N_REFS)
    p = 1 / (1 + np.exp(-(ability[:, None] - difficulty[None, :])))
    refs = (rng.random((N_REFS, N_ITEMS)) < p).astype(float)
    refs[rng.random(refs.shape) < 0.05] = np.nan
    target = (rng.random(N_ITEMS) < 1 / (1 + np.exp(-(0.3 - difficulty)))).astype(float)
    return [f"q{j:02d}" for j in range(N_ITEMS)], [f"ref-{i}" for i in range(N_REFS)], refs, target


def upload(client: TestClient, name: str = "seqbench") -> dict:
    items, names, refs, target = make_data()
    create_benchmark(client, name, score_kind="binary")
    upload_items(client, name, [{"id": i, "prompt": f"question {i}"} for i in items])
    cells = [{"model": names[i], "item": items[j], "score": refs[i, j]}
             for i in range(N_REFS) for j in range(N_ITEMS) if not math.isnan(refs[i, j])]
    cells += [{"model": TARGET, "item": items[j], "score": target[j]} for j in range(N_ITEMS)]
    upload_score_cells(client, name, cells)
    return {"name": name, "items": items, "refs": refs, "target": dict(zip(items, target.tolist()))}


def local_estimator(data: dict, **config: object) -> SequentialEstimator:
    """The estimator a session of ``config`` runs (``method`` default: the service's default)."""
    refs = data["refs"].copy()
    means = np.nanmean(refs, axis=1)
    rows, cols = np.nonzero(np.isnan(refs))
    refs[rows, cols] = means[rows]
    config.setdefault("method", DEFAULT_METHOD)
    return make_estimator(BucketPrior.from_reference_scores(refs), SessionConfig(**config))  # type: ignore[arg-type]


def assert_matches(body: dict, estimator: SequentialEstimator, items: list[str]) -> None:
    assert body["n_observed"] == estimator.n_observed
    assert body["estimate"] == pytest.approx(min(max(estimator.estimate, 0.0), 1.0), abs=1e-12)
    assert body["variance"] == pytest.approx(estimator.variance, abs=1e-12)
    lo, hi = estimator.ci  # the service clips the interval to the score range ([0, 1] here)
    assert body["ci"] == pytest.approx([min(max(lo, 0.0), 1.0), max(min(hi, 1.0), 0.0)], abs=1e-12)
    assert body["level"] == 0.95
    assert body["status"] == ("stopped" if estimator.stopped else "active")
    assert body["stop_reason"] == estimator.stop_reason
    assert body["next_items"] == [items[j] for j in estimator.propose()]


def count(client: TestClient, model: type) -> int:
    with client.app.state.session_factory() as s:
        return s.scalar(select(func.count()).select_from(model))


@pytest.mark.slow
@pytest.mark.parametrize("method", [None, *METHODS])
def test_session_runs_to_its_stopping_rule_matching_a_local_replay(client: TestClient, method: str | None) -> None:
    """Every method (omitted: the default, named in the response) gives exactly the local estimator's numbers."""
    data = upload(client)
    given = {} if method is None else {"method": method}
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "target": TARGET, "max_items": 25, **given})
    assert r.status_code == 201, r.text
    session = r.json()
    assert session["id"].startswith("ss_") and r.headers["location"] == f"/v1/sessions/{session['id']}"
    assert session["benchmark"] == data["name"] and session["target"] == TARGET
    assert session["status"] == "active" and session["stop_reason"] is None and session["n_observed"] == 0
    assert session["next_items"] and set(session["next_items"]) <= set(data["items"])
    assert session["ci"][0] <= session["estimate"] <= session["ci"][1]
    public = answered_name(method or DEFAULT_METHOD)  # refgp's former names answer refgp; rs_mean, bayesame_rs themselves
    assert session["method"] == public and session["config"]["max_items"] == 25
    assert ("deprecation" in r.headers) == (method in ALIASES)
    assert session["config"]["method"] == session["method"]
    assert sorted(session["reference_models"]) == sorted(f"ref-{i}" for i in range(N_REFS))

    local = local_estimator(data, max_items=25, method=method or DEFAULT_METHOD)
    assert_matches(session, local, data["items"])
    while session["status"] == "active":
        item = session["next_items"][0]
        r = client.post(f"/v1/sessions/{session['id']}/observations", json={"item": item, "score": data["target"][item]})
        assert r.status_code == 200, r.text
        session = r.json()
        local.observe(data["items"].index(item), data["target"][item])
        assert_matches(session, local, data["items"])
        assert session["ci"][0] <= session["estimate"] <= session["ci"][1]
    assert session["stop_reason"] in ("converged", "max_items") and session["n_observed"] <= 25
    assert session["next_items"] == []
    assert client.get(f"/v1/sessions/{session['id']}").json() == session

    trajectory = client.get(f"/v1/sessions/{session['id']}/trajectory").json()
    assert [row["n"] for row in trajectory] == list(range(1, session["n_observed"] + 1))
    assert trajectory[-1]["estimate"] == pytest.approx(session["estimate"])
    assert trajectory[-1]["ci"] == pytest.approx(session["ci"])

    observed = {row.item_id for row in _observations(client, session["id"])}
    unobserved = next(i for i in data["items"] if i not in observed)
    r = client.post(f"/v1/sessions/{session['id']}/observations", json={"item": unobserved, "score": 1})
    assert r.status_code == 409 and r.headers["content-type"].startswith("application/problem+json")
    assert client.get(f"/v1/sessions/{session['id']}").json()["n_observed"] == session["n_observed"]


def _observations(client: TestClient, session_id: str) -> list[SessionObservation]:
    with client.app.state.session_factory() as s:
        return list(s.scalars(select(SessionObservation).where(SessionObservation.session_id == session_id)
                              .order_by(SessionObservation.seq)))


def test_observation_rules(client: TestClient) -> None:
    data = upload(client)
    sid = client.post("/v1/sessions", json={"benchmark": data["name"], "target": TARGET}).json()["id"]
    url = f"/v1/sessions/{sid}/observations"
    local = local_estimator(data)

    # Any not-yet-observed item is accepted, not only the proposed ones.
    first = client.post(url, json={"item": "q59", "score": 1}).json()
    local.observe(59, 1.0)
    assert_matches(first, local, data["items"])

    same = client.post(url, json={"item": "q59", "score": 1.0})
    assert same.status_code == 200 and same.json()["n_observed"] == 1 and same.json()["estimate"] == first["estimate"]
    other = client.post(url, json={"item": "q59", "score": 0})
    assert other.status_code == 409 and other.json()["errors"][0]["item"] == "q59"
    unknown = client.post(url, json={"item": "nope", "score": 1})
    assert unknown.status_code == 404 and unknown.headers["content-type"].startswith("application/problem+json")
    assert client.post(url, json={"item": "q01", "score": 0.5}).status_code == 422  # binary benchmark
    assert client.post(url, json={"item": "q01", "score": 2}).status_code == 422
    assert client.post(url, json={"item": "q01"}).status_code == 422
    assert client.post(url, json={"observations": []}).status_code == 422
    assert client.post("/v1/sessions/ss_000000000000000000000000/observations",
                       json={"item": "q01", "score": 1}).status_code == 404
    assert client.get("/v1/sessions/ss_000000000000000000000000").status_code == 404

    # All-or-nothing: one bad observation stores none of the batch.
    bad_batch = {"observations": [{"item": "q01", "score": 1}, {"item": "nope", "score": 0}]}
    assert client.post(url, json=bad_batch).status_code == 404
    assert client.post(url, json={"observations": [{"item": "q01", "score": 1}, {"item": "q02", "score": 3}]}
                       ).status_code == 422
    assert client.post(url, json={"observations": [{"item": "q01", "score": 1}, {"item": "q01", "score": 0}]}
                       ).status_code == 409
    assert client.get(f"/v1/sessions/{sid}").json()["n_observed"] == 1

    # A batch, with a repeat of an observed item (a no-op), applied in request order.
    batch = {"observations": [{"item": "q03", "score": 0}, {"item": "q59", "score": 1}, {"item": "q04", "score": 1}]}
    body = client.post(url, json=batch).json()
    local.observe(3, 0.0)
    local.observe(4, 1.0)
    assert_matches(body, local, data["items"])
    assert [o.seq for o in _observations(client, sid)] == [0, 1, 2]
    assert len(client.get(f"/v1/sessions/{sid}/trajectory").json()) == 3


def test_prior_is_computed_once_per_reference_set(client: TestClient) -> None:
    data = upload(client)
    one = client.post("/v1/sessions", json={"benchmark": data["name"], "target": TARGET})
    two = client.post("/v1/sessions", json={"benchmark": data["name"], "target": TARGET,
                                            "reference_models": "all", "method": "rs_mean", "seed": 3})
    refs = [f"ref-{i}" for i in reversed(range(N_REFS))]  # the same set, in another order
    new_model = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "new-ckpt",
                                                  "reference_models": refs})
    assert new_model.status_code == 201 and new_model.json()["target"] == "new-ckpt"
    assert one.status_code == two.status_code == 201
    assert count(client, SessionPrior) == 1
    clear_caches()
    three = client.post("/v1/sessions", json={"benchmark": data["name"], "target": TARGET, "seed": 1})
    assert three.status_code == 201 and count(client, SessionPrior) == 1
    subset = client.post("/v1/sessions", json={"benchmark": data["name"], "target": TARGET,
                                               "reference_models": ["ref-0", "ref-3", "ref-5"]})
    assert subset.status_code == 201 and subset.json()["reference_models"] == ["ref-0", "ref-3", "ref-5"]
    assert count(client, SessionPrior) == 2


@pytest.mark.parametrize("method", [DEFAULT_METHOD, "proeval_bq", "fluid_irt", "refgp_v2"])
def test_derived_values_are_stored_with_the_prior_and_shared(client: TestClient, db_session_factory,
                                                              monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """What a method derives from the prior (features, calibration curves) is stored in session_priors.derived;
    another worker (empty in-process caches) restores it instead of recomputing, and its session is identical."""
    import sys  # noqa: PLC0415

    from evalplan.core.sequential import base as sequential_base  # noqa: PLC0415
    from evalplan.sessions.priors import unpack_derived  # noqa: PLC0415

    data = upload(client)
    body = {"benchmark": data["name"], "target": TARGET, "method": method}
    one = client.post("/v1/sessions", json=body)
    assert one.status_code == 201, one.text
    with db_session_factory() as db:
        row = db.scalars(select(SessionPrior)).one()
        assert row.derived is not None
        stored = unpack_derived(row.derived)
    assert stored, "nothing derived was stored"
    clear_caches()  # another worker / a restart
    computed: list[str] = []
    original = sequential_base.store_derived

    def spy(prior: object, key: str, value: object) -> object:
        computed.append(key)
        return original(prior, key, value)  # type: ignore[arg-type]

    for name, module in list(sys.modules.items()):  # every estimator module's own reference to it
        if name.startswith("evalplan.core.sequential") and getattr(module, "store_derived", None) is original:
            monkeypatch.setattr(module, "store_derived", spy)
    two = client.post("/v1/sessions", json=body)
    assert two.status_code == 201, two.text
    assert not set(computed) & set(stored)  # restored, not recomputed
    for field in ("estimate", "variance", "ci", "next_items", "hyperparameters"):
        assert two.json()[field] == one.json()[field], field


@pytest.mark.slow
@pytest.mark.parametrize("method", ["bayesame", DEFAULT_METHOD, "proeval_bq", "fluid_irt"])
def test_restart_mid_session_changes_nothing(client: TestClient, db_session_factory, database_urls, backend,
                                             method: str) -> None:
    data = upload(client)
    session = client.post("/v1/sessions", json={"benchmark": data["name"], "target": TARGET, "method": method,
                                                "batch_size": 2, "refit_every": 5, "max_items": 30}).json()
    local = local_estimator(data, batch_size=2, refit_every=5, max_items=30, method=method)
    for _ in range(4):
        obs = [{"item": i, "score": data["target"][i]} for i in session["next_items"]]
        session = client.post(f"/v1/sessions/{session['id']}/observations", json={"observations": obs}).json()
        for o in obs:
            local.observe(data["items"].index(o["item"]), o["score"])
    assert_matches(session, local, data["items"])

    clear_caches()  # a fresh process / another replica
    app = create_app(settings_for(database_urls[backend]), session_factory=db_session_factory,
                     dispatcher=NoJobsDispatcher())
    with TestClient(app, raise_server_exceptions=False) as fresh:
        assert fresh.get(f"/v1/sessions/{session['id']}").json() == session
        assert len(fresh.get(f"/v1/sessions/{session['id']}/trajectory").json()) == session["n_observed"]
        while session["status"] == "active":
            obs = [{"item": i, "score": data["target"][i]} for i in session["next_items"]]
            r = fresh.post(f"/v1/sessions/{session['id']}/observations", json={"observations": obs})
            assert r.status_code == 200, r.text
            session = r.json()
            for o in obs:
                local.observe(data["items"].index(o["item"]), o["score"])
            assert_matches(session, local, data["items"])
            clear_caches()  # every step replays from the database
    assert session["status"] == "stopped"


def test_bad_creates_store_nothing(client: TestClient) -> None:
    data = upload(client)
    name = data["name"]
    cases = [
        ({"benchmark": "missing", "target": TARGET}, 404, "benchmark"),
        ({"benchmark": name, "target": TARGET, "method": "magic"}, 422, "method"),
        ({"benchmark": name, "target": TARGET, "epsilon1": -1}, 422, "epsilon1"),
        ({"benchmark": name, "target": TARGET, "window": 0}, 422, "window"),
        ({"benchmark": name, "target": TARGET, "refit_every": -1}, 422, "refit_every"),
        ({"benchmark": name, "target": TARGET, "max_items": 0}, 422, "max_items"),
        ({"benchmark": name, "target": TARGET, "batch_size": 0}, 422, "batch_size"),
        ({"benchmark": name, "target": TARGET, "hyperparameters": {"gamma": 1.0}}, 422, "hyperparameters"),
        ({"benchmark": name, "target": TARGET, "reference_models": ["ref-0"]}, 422, "reference_models"),
        ({"benchmark": name, "target": TARGET, "reference_models": ["ref-0", "ghost"]}, 422, "reference_models.1"),
        ({"benchmark": name, "target": TARGET, "reference_models": ["ref-0", TARGET]}, 422, "reference_models.1"),
        ({"benchmark": name, "target": ""}, 422, "target"),
        ({"benchmark": name}, 422, "target"),
        ({"benchmark": name, "target": TARGET, "colour": "blue"}, 422, "colour"),
    ]
    for body, status, field in cases:
        r = client.post("/v1/sessions", json=body)
        assert r.status_code == status, (body, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        problem = r.json()
        if status == 422:
            assert any(e.get("field") == field for e in problem["errors"]), (body, problem)
    method_problem = client.post("/v1/sessions", json={"benchmark": name, "target": TARGET, "method": "magic"}).json()
    assert all(m in method_problem["detail"] for m in ("bayesame", "bayesame_rs", "rs_mean"))
    assert count(client, EvalSession) == 0 and count(client, SessionPrior) == 0


def test_list_sessions_filters_and_pages(client: TestClient) -> None:
    data = upload(client)
    ids = [client.post("/v1/sessions", json={"benchmark": data["name"], "target": t, "max_items": 1}).json()["id"]
           for t in ("a", "b", "a")]
    first_item = client.get(f"/v1/sessions/{ids[0]}").json()["next_items"][0]
    assert client.post(f"/v1/sessions/{ids[0]}/observations",
                       json={"item": first_item, "score": 1}).json()["stop_reason"] == "max_items"
    listed = client.get("/v1/sessions").json()
    assert [s["id"] for s in listed["items"]] == ids[::-1] and listed["next_cursor"] is None
    assert [s["id"] for s in client.get("/v1/sessions", params={"target": "a"}).json()["items"]] == [ids[2], ids[0]]
    assert [s["id"] for s in client.get("/v1/sessions", params={"status": "stopped"}).json()["items"]] == [ids[0]]
    assert len(client.get("/v1/sessions", params={"benchmark": data["name"], "status": "active"}).json()["items"]) == 2
    page = client.get("/v1/sessions", params={"limit": 2}).json()
    rest = client.get("/v1/sessions", params={"limit": 2, "cursor": page["next_cursor"]}).json()
    assert [s["id"] for s in page["items"] + rest["items"]] == ids[::-1] and rest["next_cursor"] is None
    assert client.get("/v1/sessions", params={"status": "paused"}).status_code == 422
    assert client.get("/v1/sessions", params={"benchmark": "missing"}).status_code == 404


@pytest.mark.slow
def test_concurrent_posts_lose_and_double_nothing(committed_client: TestClient) -> None:
    data = upload(committed_client)
    session = committed_client.post("/v1/sessions", json={
        "benchmark": data["name"], "target": TARGET, "epsilon1": 0, "epsilon2": 0}).json()
    url = f"/v1/sessions/{session['id']}/observations"
    items = data["items"][:50]

    def post(item: str) -> int:
        return committed_client.post(url, json={"item": item, "score": data["target"][item]}).status_code

    with ThreadPoolExecutor(max_workers=16) as pool:
        statuses = list(pool.map(post, items))
    assert statuses == [200] * 50
    final = committed_client.get(f"/v1/sessions/{session['id']}").json()
    assert final["n_observed"] == 50
    stored = _observations(committed_client, session["id"])
    assert [o.seq for o in stored] == list(range(50)) and sorted(o.item_id for o in stored) == sorted(items)

    # The stored order is the order the estimator saw: a replay reproduces the final state.
    local = local_estimator(data, epsilon1=0, epsilon2=0)
    for o in stored:
        local.observe(data["items"].index(o.item_id), o.score)
    assert_matches(final, local, data["items"])
    assert len(committed_client.get(f"/v1/sessions/{session['id']}/trajectory").json()) == 50


@pytest.mark.slow
def test_a_batch_that_crosses_the_stopping_rule_is_kept_but_not_used(client: TestClient) -> None:
    data = upload(client)
    sid = client.post("/v1/sessions", json={"benchmark": data["name"], "target": TARGET, "max_items": 3}).json()["id"]
    batch = [{"item": i, "score": data["target"][i]} for i in data["items"][:5]]
    body = client.post(f"/v1/sessions/{sid}/observations", json={"observations": batch}).json()
    local = local_estimator(data, max_items=3)
    for j in range(3):
        local.observe(j, data["target"][data["items"][j]])
    assert_matches(body, local, data["items"])
    assert body["status"] == "stopped" and body["stop_reason"] == "max_items" and body["n_observed"] == 3
    assert len(_observations(client, sid)) == 5  # stored (nothing posted is lost), after the stop
    clear_caches()
    assert len(client.get(f"/v1/sessions/{sid}/trajectory").json()) == 3


def test_config_shows_bayesame_epsilons_only_where_its_rule_applies(client: TestClient) -> None:
    data = upload(client, "epsbench")
    paper = client.post("/v1/sessions", json={"benchmark": data["name"], "target": TARGET, "method": "bayesame"})
    assert paper.status_code == 201, paper.text
    assert {"epsilon1", "epsilon2", "window"} <= set(paper.json()["config"])
    precise = client.post("/v1/sessions", json={"benchmark": data["name"], "target": TARGET + "-2",
                                                "stop": {"half_width": 0.05}})
    assert precise.status_code == 201, precise.text
    shown = precise.json()["config"]
    assert shown["stop"]["half_width"] == 0.05 and not {"epsilon1", "epsilon2", "window"} & set(shown)
    again = client.get(f"/v1/sessions/{precise.json()['id']}").json()
    assert again["config"] == shown
