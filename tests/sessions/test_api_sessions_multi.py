"""Multi-target sequential sessions over HTTP (extension of API.md "Sequential sessions", papers/004 §3.2),
on SQLite and PostgreSQL.

Every response is checked against a ``MultiTargetEstimator`` fed the same (target, item, score)
sequence in the test: the service adds storage, validation and concurrency, never other numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from evalplan.core.sequential import BucketPrior, SessionConfig
from evalplan.core.sequential.methods import DEFAULT_MULTI_TARGET_METHOD
from evalplan.core.sequential.multi_target import MultiTargetEstimator
from evalplan.db.models import EvalSession, SessionObservation, SessionPrior
from evalplan.main import create_app
from evalplan.sessions.cache import clear_caches
from evalplan.sessions.state import session_stop_reason
from support.helpers import NoJobsDispatcher, create_benchmark, settings_for, upload_items, upload_score_cells

N_ITEMS = 40
N_REFS = 8
TARGETS = ["ckpt-a", "ckpt-b", "ckpt-c"]


def make_data(kind: str, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Item ids, reference scores (N_REFS x N_ITEMS) and the targets' true scores (3 x N_ITEMS)."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1.2, N_ITEMS)
    ability = np.concatenate([np.linspace(-1.5, 1.5, N_REFS), [-0.5, 0.2, 0.9]])
    p = 1 / (1 + np.exp(-(ability[:, None] - difficulty[None, :])))
    scores = (rng.random(p.shape) < p).astype(float) if kind == "binary" else np.round(
        np.clip(p + rng.normal(0, 0.05, p.shape), 0, 1), 4)
    return [f"q{j:02d}" for j in range(N_ITEMS)], scores[:N_REFS], scores[N_REFS:]


def upload(client: TestClient, kind: str = "binary", name: str = "multibench") -> dict:
    """A benchmark with the references and the targets' true scores (so "all" must skip the targets)."""
    items, refs, truth = make_data(kind)
    create_benchmark(client, name, score_kind=kind)
    upload_items(client, name, [{"id": i, "prompt": f"question {i}"} for i in items])
    names = [f"ref-{i}" for i in range(N_REFS)]
    cells = [{"model": names[i], "item": items[j], "score": refs[i, j]} for i in range(N_REFS) for j in range(N_ITEMS)]
    cells += [{"model": TARGETS[t], "item": items[j], "score": truth[t, j]}
              for t in range(len(TARGETS)) for j in range(N_ITEMS)]
    upload_score_cells(client, name, cells)
    return {"name": name, "kind": kind, "items": items, "refs": refs,
            "truth": {TARGETS[t]: dict(zip(items, truth[t].tolist())) for t in range(len(TARGETS))}}


def local_estimator(data: dict, targets: list[str] = TARGETS, n_latent: int = 2,
                    **config: object) -> MultiTargetEstimator:
    config.setdefault("method", DEFAULT_MULTI_TARGET_METHOD)  # what a multi-target session without method runs
    local = MultiTargetEstimator(BucketPrior.from_reference_scores(data["refs"].copy()), SessionConfig(**config),
                                 len(targets), n_latent, continuous=data["kind"] != "binary")
    local.score_range = (0.0, 1.0)  # what the service sets: intervals and estimates inside the score range
    return local


def observe(local: MultiTargetEstimator, data: dict, obs: list[dict], targets: list[str] = TARGETS) -> None:
    """Feed what the service feeds: observations of a stopped target are kept but not used."""
    for o in obs:
        t = targets.index(o["target"])
        if not local.stopped[t]:
            local.observe(t, data["items"].index(o["item"]), o["score"])


def assert_matches(body: dict, local: MultiTargetEstimator, data: dict, targets: list[str] = TARGETS) -> None:
    items = data["items"]
    assert body["target"] is None and body["estimate"] is None and body["variance"] is None and body["ci"] is None
    assert body["targets"] == targets
    assert body["n_observed"] == local.n_total_observed
    assert body["status"] == ("stopped" if local.all_stopped else "active")
    assert body["stop_reason"] == session_stop_reason(list(local.stop_reasons))
    proposals = local.propose()
    assert body["next"] == [{"target": targets[t], "item": items[j]} for t, j in proposals]
    assert body["next_items"] == [items[j] for _, j in proposals]
    assert list(body["per_target"]) == targets
    cis = local.cis
    for t, name in enumerate(targets):
        state = body["per_target"][name]
        assert state["status"] == ("stopped" if local.stopped[t] else "active")
        assert state["stop_reason"] == local.stop_reasons[t]
        assert state["n_observed"] == int(local.n_observed[t])
        assert state["estimate"] == pytest.approx(local.reported_estimate(t), abs=1e-9)
        assert state["variance"] == pytest.approx(float(local.variances[t]), abs=1e-9)
        assert state["ci"] == pytest.approx(list(cis[t]), abs=1e-9)
        assert state["ci"][0] <= state["estimate"] <= state["ci"][1]


def count(client: TestClient, model: type) -> int:
    with client.app.state.session_factory() as s:
        return s.scalar(select(func.count()).select_from(model))


def truth_of(data: dict, pairs: list[dict]) -> list[dict]:
    return [{"target": p["target"], "item": p["item"], "score": data["truth"][p["target"]][p["item"]]} for p in pairs]


@pytest.mark.parametrize("kind", ["binary", "continuous"])
def test_multi_session_runs_until_every_target_stopped(client: TestClient, kind: str) -> None:
    data = upload(client, kind)
    config = {"max_items": 12, "refit_every": 10}
    r = client.post("/v1/sessions", json={"benchmark": data["name"], "targets": TARGETS, **config})
    assert r.status_code == 201, r.text
    session = r.json()
    assert r.headers["location"] == f"/v1/sessions/{session['id']}"
    assert session["reference_models"] == [f"ref-{i}" for i in range(N_REFS)]  # every target excluded
    assert session["n_latent"] == 2 and session["method"] == "bayesame" and session["n_observed"] == 0
    local = local_estimator(data, **config)
    assert_matches(session, local, data)

    steps = 0
    while session["status"] == "active":
        steps += 1
        assert steps <= 3 * 12, "the session must stop within max_items per target"
        if steps % 2:  # one proposed pair, single form
            obs = truth_of(data, session["next"][:1])
            body = obs[0]
        else:  # every proposed pair, batch form
            obs = truth_of(data, session["next"])
            body = {"observations": obs}
        r = client.post(f"/v1/sessions/{session['id']}/observations", json=body)
        assert r.status_code == 200, r.text
        session = r.json()
        observe(local, data, obs)
        assert_matches(session, local, data)
    assert local.n_refits >= 1
    assert session["next"] == [] and session["next_items"] == []
    assert all(s["status"] == "stopped" and s["n_observed"] <= 12 for s in session["per_target"].values())
    assert session["stop_reason"] in ("converged", "max_items")
    assert client.get(f"/v1/sessions/{session['id']}").json() == session

    trajectory = client.get(f"/v1/sessions/{session['id']}/trajectory").json()
    assert len(trajectory) == session["n_observed"] == len(local.trajectory)
    for row, mine in zip(trajectory, local.trajectory):
        assert row["target"] == TARGETS[mine["target"]] and row["n"] == mine["n"]
        assert row["estimate"] == pytest.approx(mine["estimate"], abs=1e-9)
        assert row["ci"] == pytest.approx(mine["ci"], abs=1e-9)
    last = {row["target"]: row for row in trajectory}
    assert all(last[t]["n"] == session["per_target"][t]["n_observed"] for t in TARGETS)

    r = client.post(f"/v1/sessions/{session['id']}/observations",
                    json={"target": TARGETS[0], "item": data["items"][-1], "score": 1})
    assert r.status_code == 409 and r.headers["content-type"].startswith("application/problem+json")
    assert client.get(f"/v1/sessions/{session['id']}").json()["n_observed"] == session["n_observed"]


def test_multi_observation_rules(client: TestClient) -> None:
    data = upload(client)
    targets = TARGETS[:2]
    a, b = targets
    refs = [f"ref-{i}" for i in range(N_REFS)]  # not "all": that would include the third model
    session = client.post("/v1/sessions", json={"benchmark": data["name"], "targets": targets, "max_items": 6,
                                                "n_latent": 3, "reference_models": refs}).json()
    sid, url = session["id"], f"/v1/sessions/{session['id']}/observations"
    local = local_estimator(data, targets, n_latent=3, max_items=6)
    assert session["n_latent"] == 3
    assert_matches(session, local, data, targets)

    first = client.post(url, json={"target": a, "item": "q39", "score": 1})
    assert first.status_code == 200, first.text
    observe(local, data, [{"target": a, "item": "q39", "score": 1.0}], targets)
    assert_matches(first.json(), local, data, targets)

    # Same (target, item, score): a no-op; another score: 409; the same item for the other target: new.
    same = client.post(url, json={"observations": [{"target": a, "item": "q39", "score": 1.0}]})
    assert same.status_code == 200 and same.json() == {**first.json(), "updated_at": same.json()["updated_at"]}
    other = client.post(url, json={"target": a, "item": "q39", "score": 0})
    assert other.status_code == 409 and other.json()["errors"][0]["item"] == "q39"
    assert other.json()["errors"][0]["target"] == a

    def problem(body: dict, status: int, field: str | None = None) -> None:
        r = client.post(url, json=body)
        assert r.status_code == status, (body, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        if field is not None:
            assert any(e.get("field") == field for e in r.json()["errors"]), r.json()

    problem({"item": "q01", "score": 1}, 422, "observations.0.target")  # missing target
    problem({"target": "ghost", "item": "q01", "score": 1}, 422, "observations.0.target")  # unknown target
    problem({"observations": [{"target": a, "item": "q01", "score": 1}, {"item": "q02", "score": 1}]}, 422,
            "observations.1.target")
    problem({"target": a, "item": "nope", "score": 1}, 404)
    problem({"target": a, "item": "q01", "score": 0.5}, 422, "observations.0.score")  # binary benchmark
    problem({"observations": [{"target": b, "item": "q01", "score": 1}, {"target": b, "item": "q01", "score": 0}]},
            409)
    problem({"observations": [{"target": b, "item": "q01", "score": 1}, {"target": b, "item": "nope", "score": 0}]},
            404)
    assert client.get(f"/v1/sessions/{sid}").json()["n_observed"] == 1  # all-or-nothing

    both = [{"target": b, "item": "q39", "score": 0}, {"target": a, "item": "q39", "score": 1},
            {"target": b, "item": "q05", "score": 1}]
    body = client.post(url, json={"observations": both}).json()
    observe(local, data, [both[0], both[2]], targets)
    assert_matches(body, local, data, targets)
    assert body["per_target"][b]["n_observed"] == 2 and body["n_observed"] == 3

    # Target a stops on its own (max_items 6); a batch crossing its stop is kept but not used.
    batch = [{"target": a, "item": f"q{j:02d}", "score": data["truth"][a][f"q{j:02d}"]} for j in range(10, 17)]
    body = client.post(url, json={"observations": batch}).json()
    observe(local, data, batch, targets)
    assert_matches(body, local, data, targets)
    assert body["per_target"][a]["status"] == "stopped"
    assert body["per_target"][a]["stop_reason"] == "max_items" and body["per_target"][a]["n_observed"] == 6
    assert body["status"] == "active" and body["stop_reason"] is None and body["per_target"][b]["status"] == "active"
    assert all(p["target"] == b for p in body["next"])
    problem({"target": a, "item": "q30", "score": 1}, 409, "observations.0.target")  # a stopped target
    problem({"target": a, "item": "q39", "score": 1}, 409)  # even an exact repeat (like a stopped session)
    with client.app.state.session_factory() as s:
        assert s.scalar(select(func.count()).select_from(SessionObservation)
                        .where(SessionObservation.session_id == sid)) == 3 + 7
    ok = client.post(url, json={"target": b, "item": "q30", "score": 1})
    assert ok.status_code == 200
    observe(local, data, [{"target": b, "item": "q30", "score": 1.0}], targets)
    assert_matches(ok.json(), local, data, targets)

    # A target on a single-target session's observation is 422 (that contract is unchanged).
    single = client.post("/v1/sessions", json={"benchmark": data["name"], "target": "solo"}).json()
    assert "targets" not in single and "per_target" not in single and "next" not in single
    assert client.post(f"/v1/sessions/{single['id']}/observations",
                       json={"target": "solo", "item": "q01", "score": 1}).status_code == 422
    listed = client.get("/v1/sessions").json()["items"]
    assert [s["id"] for s in listed] == [single["id"], sid] and listed[1]["per_target"] == ok.json()["per_target"]


def test_multi_bad_creates_store_nothing(client: TestClient) -> None:
    data = upload(client)
    name = data["name"]
    cases = [
        ({"benchmark": name, "target": "x", "targets": TARGETS}, "targets"),
        ({"benchmark": name, "targets": ["only-one"]}, "targets"),
        ({"benchmark": name, "targets": []}, "targets"),
        ({"benchmark": name, "targets": ["x", "y", "x"]}, "targets.2"),
        ({"benchmark": name, "targets": ["x", ""]}, "targets.1"),
        ({"benchmark": name, "targets": TARGETS, "method": "rs_mean"}, "method"),
        ({"benchmark": name, "targets": TARGETS, "method": "refgp_ivr"}, "method"),  # no joint form (docs/SEQUENTIAL.md)
        ({"benchmark": name, "targets": TARGETS, "method": "proeval_bq"}, "method"),
        ({"benchmark": name, "targets": TARGETS, "n_latent": 0}, "n_latent"),
        ({"benchmark": name, "targets": TARGETS, "n_latent": 1.5}, "n_latent"),
        ({"benchmark": name, "target": "x", "n_latent": 2}, "n_latent"),
        ({"benchmark": name, "targets": TARGETS, "reference_models": ["ref-0", "ref-1", TARGETS[1]]},
         "reference_models.2"),
        ({"benchmark": name, "targets": TARGETS, "window": 0}, "window"),
    ]
    for body, field in cases:
        r = client.post("/v1/sessions", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert any(e.get("field") == field for e in r.json()["errors"]), (body, r.json())
    assert count(client, EvalSession) == 0 and count(client, SessionPrior) == 0

    ok = client.post("/v1/sessions", json={"benchmark": name, "targets": TARGETS[:2], "method": "bayesame_rs",
                                           "reference_models": ["ref-0", "ref-1", TARGETS[2]]})
    assert ok.status_code == 201, ok.text
    assert ok.json()["reference_models"] == ["ref-0", "ref-1", TARGETS[2]]  # a non-target may be a reference
    omitted = client.post("/v1/sessions", json={"benchmark": name, "targets": TARGETS[:2]})
    assert omitted.status_code == 201 and omitted.json()["method"] == "bayesame"  # the multi-target default


@pytest.mark.slow
def test_multi_restart_mid_session_changes_nothing(client: TestClient, db_session_factory, database_urls,
                                                   backend) -> None:
    data = upload(client, "continuous")
    config = {"batch_size": 2, "refit_every": 7, "max_items": 10}
    session = client.post("/v1/sessions", json={"benchmark": data["name"], "targets": TARGETS, **config}).json()
    local = local_estimator(data, **config)
    for _ in range(3):
        obs = truth_of(data, session["next"])
        session = client.post(f"/v1/sessions/{session['id']}/observations", json={"observations": obs}).json()
        observe(local, data, obs)
    assert_matches(session, local, data)
    trajectory = client.get(f"/v1/sessions/{session['id']}/trajectory").json()

    clear_caches()  # a fresh process / another replica
    app = create_app(settings_for(database_urls[backend]), session_factory=db_session_factory,
                     dispatcher=NoJobsDispatcher())
    with TestClient(app, raise_server_exceptions=False) as fresh:
        assert fresh.get(f"/v1/sessions/{session['id']}").json() == session
        assert fresh.get(f"/v1/sessions/{session['id']}/trajectory").json() == trajectory
        steps = 0
        while session["status"] == "active":
            steps += 1
            assert steps <= 3 * 10
            obs = truth_of(data, session["next"])
            r = fresh.post(f"/v1/sessions/{session['id']}/observations", json={"observations": obs})
            assert r.status_code == 200, r.text
            session = r.json()
            observe(local, data, obs)
            assert_matches(session, local, data)
            clear_caches()  # every step replays from the database
    assert session["status"] == "stopped"


def test_multi_concurrent_posts_lose_and_double_nothing(committed_client: TestClient) -> None:
    from concurrent.futures import ThreadPoolExecutor

    data = upload(committed_client)
    targets = TARGETS[:2]
    refs = [f"ref-{i}" for i in range(N_REFS)]
    session = committed_client.post("/v1/sessions", json={
        "benchmark": data["name"], "targets": targets, "reference_models": refs, "epsilon1": 0, "epsilon2": 0}).json()
    url = f"/v1/sessions/{session['id']}/observations"
    pairs = [{"target": t, "item": i} for t in targets for i in data["items"][:15]]

    def post(pair: dict) -> int:
        return committed_client.post(url, json=truth_of(data, [pair])[0]).status_code

    with ThreadPoolExecutor(max_workers=12) as pool:
        statuses = list(pool.map(post, pairs))
    assert statuses == [200] * len(pairs)
    final = committed_client.get(f"/v1/sessions/{session['id']}").json()
    assert final["n_observed"] == len(pairs)
    with committed_client.app.state.session_factory() as s:
        stored = list(s.scalars(select(SessionObservation).where(SessionObservation.session_id == session["id"])
                                .order_by(SessionObservation.seq)))
    assert [o.seq for o in stored] == list(range(len(pairs)))
    local = local_estimator(data, targets, epsilon1=0, epsilon2=0)
    observe(local, data, [{"target": targets[o.target_index], "item": o.item_id, "score": o.score} for o in stored],
            targets)
    assert_matches(final, local, data, targets)
