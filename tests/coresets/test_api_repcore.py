"""RepCore coresets end to end (papers/003 §2.2-2.4) on a SYNTHETIC suite: hidden-state and score
uploads, POST /v1/coresets method repcore (real in-process job, training cached and reused),
predictions with the LOO interval, and the bad inputs of the issue (422, nothing stored)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from sqlalchemy import func, select

from evalplan.core.repcore.extrapolation import RepCoreExtrapolator
from evalplan.core.repcore.synthetic import make_synthetic_suite
from evalplan.db.models import Coreset, TrainedModel
from support.helpers import wait_for_job

N_ITEMS, WIDTHS, BUDGET = 200, [16, 24, 12, 20, 32], 20
PARAMS = {"epochs": 40, "d_z": 8}


@pytest.fixture(scope="module")
def suite():
    return make_synthetic_suite(n_items=N_ITEMS, n_sources=len(WIDTHS), n_targets=2, widths=WIDTHS, seed=0)


def ids() -> list[str]:
    return [f"i{j:03d}" for j in range(N_ITEMS)]


def upload_suite(client, suite, bench: str = "syn") -> None:
    r = client.post("/v1/benchmarks", json={"name": bench, "score_kind": "binary"})
    assert r.status_code == 201, r.text
    body = "\n".join(json.dumps({"id": i, "prompt": f"synthetic item {i}"}) for i in ids())
    r = client.post(f"/v1/benchmarks/{bench}/items", content=body, headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 200, r.text
    for m, states in enumerate(suite.source_states):
        buf = io.BytesIO()
        if m % 2:
            np.savez(buf, ids=np.array(ids()), states=states)
            data, name = {"model": f"src{m}"}, "s.npz"
        else:
            np.save(buf, states.astype(np.float16))
            data, name = {"model": f"src{m}", "items": json.dumps(ids())}, "s.npy"
        r = client.post(f"/v1/benchmarks/{bench}/hidden-states", data=data, files={"file": (name, buf.getvalue())})
        assert r.status_code == 201, r.text
    lines = ["model," + ",".join(ids())]
    lines += [f"src{m}," + ",".join(str(int(v)) for v in row) for m, row in enumerate(suite.source_correctness)]
    r = client.post(f"/v1/benchmarks/{bench}/scores", content="\n".join(lines) + "\n",
                    headers={"content-type": "text/csv"})
    assert r.status_code == 200, r.text


def create(client, **body) -> dict:
    r = client.post("/v1/coresets", json={"method": "repcore", "benchmarks": ["syn"], **body})
    assert r.status_code == 202, r.text
    job = wait_for_job(client, r.json()["job"]["id"], timeout=300)
    assert job["status"] == "succeeded", job
    assert job["queue"] == "gpu" if "queue" in job else True
    coreset = client.get(f"/v1/coresets/{r.json()['coreset']['id']}").json()
    assert coreset["status"] == "ready", coreset
    return coreset


def test_repcore_end_to_end(committed_client, committed_session_factory, suite) -> None:
    client = committed_client
    upload_suite(client, suite)
    coreset = create(client, budget=BUDGET, reference_models="all", params=PARAMS)
    diag = coreset["diagnostics"]
    assert 0.5 < diag["test_auc"] <= 1.0
    assert diag["reused_training"] is False
    assert diag["source_models"] == [f"src{m}" for m in range(len(WIDTHS))]
    assert coreset["n_items"] == BUDGET and [i["rank"] for i in coreset["items"]] == list(range(1, BUDGET + 1))
    assert len({i["item"] for i in coreset["items"]}) == BUDGET
    assert sum(i["weight"] for i in coreset["items"]) == N_ITEMS  # weights are cluster sizes
    assert coreset["params"]["d_z"] == 8 and coreset["params"]["input"] == "embeddings"

    # identical request: the trained alignment is reused, the selection is the same
    again = create(client, budget=BUDGET, reference_models="all", params=PARAMS)
    assert again["diagnostics"]["reused_training"] is True
    assert again["diagnostics"]["test_auc"] == diag["test_auc"]
    assert [i["item"] for i in again["items"]] == [i["item"] for i in coreset["items"]]
    with committed_session_factory() as session:
        assert session.scalar(select(func.count()).select_from(TrainedModel)) == 1

    # a fraction budget, the correctness-pattern ablation (no training)
    ablation = create(client, budget={"fraction": 0.05}, reference_models=["src0", "src1", "src2"],
                      params={"input": "correctness"})
    assert ablation["n_items"] == 10 and ablation["diagnostics"]["test_auc"] is None

    # predict from a target's anchor scores
    position = {item: j for j, item in enumerate(ids())}
    for target in suite.target_correctness:
        scores = [{"benchmark": "syn", "item": i["item"], "score": float(target[position[i["item"]]])}
                  for i in coreset["items"]]
        truth = float(target.mean())
        r = client.post(f"/v1/coresets/{coreset['id']}/predict", json={"scores": scores})
        assert r.status_code == 200, r.text
        out = r.json()
        est = out["benchmarks"]["syn"]["estimate"]
        lo, hi = out["benchmarks"]["syn"]["interval"]
        assert lo <= est <= hi and out["overall"]["estimate"] == est
        # eq. 8 exactly, recomputed here from the anchors and the sources' mean correctness
        anchor_idx = np.array([position[i["item"]] for i in coreset["items"]])
        x = suite.source_correctness.mean(axis=0)
        expected = RepCoreExtrapolator(ridge_alpha=1.0).fit(anchor_idx, target[anchor_idx], x).estimate_
        assert est == pytest.approx(expected, abs=1e-6)  # the suite holds float32 scores
        # 20 binary anchors: the estimate is a noisy but informative read of the truth
        assert abs(est - truth) < 0.2, (est, truth)
        assert out["agreement"] is None and isinstance(out["extrapolation"], bool)
        assert out["level"] == 0.95
        # 5 sources cannot calibrate a 95% conformal interval: it is the whole scale
        assert (lo, hi) == (0.0, 1.0)
        narrow = client.post(f"/v1/coresets/{coreset['id']}/predict",
                             json={"scores": scores, "level": 0.8}).json()["benchmarks"]["syn"]
        assert narrow["estimate"] == est and 0 < narrow["interval"][1] - narrow["interval"][0] < 1
        assert narrow["interval"][0] <= est <= narrow["interval"][1]

    # stored scores of a target model give the same estimate as posted ones
    target = suite.target_correctness[0]
    lines = ["model," + ",".join(ids()), "stored," + ",".join(str(int(v)) for v in target)]
    assert client.post("/v1/benchmarks/syn/scores", content="\n".join(lines) + "\n",
                       headers={"content-type": "text/csv"}).status_code == 200
    stored = client.post(f"/v1/coresets/{coreset['id']}/predict", json={"model": "stored"}).json()
    scores = [{"benchmark": "syn", "item": i["item"], "score": float(target[position[i["item"]]])}
              for i in coreset["items"]]
    posted = client.post(f"/v1/coresets/{coreset['id']}/predict", json={"scores": scores}).json()
    assert stored["overall"]["estimate"] == posted["overall"]["estimate"]
    # a target far outside the sources is flagged
    low = [{**s, "score": 0.0} for s in scores]
    assert client.post(f"/v1/coresets/{coreset['id']}/predict", json={"scores": low}).json()["extrapolation"] is True


BAD = {
    "one source": ({"reference_models": ["src0"]}, "at least 2"),
    "no reference models": ({"reference_models": None}, "reference_models"),
    "source without hidden states": ({"reference_models": ["src0", "plain"]}, "plain: no hidden states"),
    "budget larger than N": ({"budget": N_ITEMS + 1}, f"larger than the {N_ITEMS}"),
    "unknown param": ({"params": {"dz": 8}}, "valid parameters"),
    "bad param value": ({"params": {"d_z": 0}}, "d_z must be >= 1"),
    "bad input choice": ({"params": {"input": "text"}}, "one of"),
    "two benchmarks": ({"benchmarks": ["syn", "other"]}, "one benchmark per coreset"),
}


def test_repcore_bad_inputs_are_422_and_store_nothing(committed_client, committed_session_factory, suite) -> None:
    client = committed_client
    upload_suite(client, suite)
    assert client.post("/v1/benchmarks", json={"name": "other"}).status_code == 201
    csv = "model," + ",".join(ids()) + "\nplain," + ",".join("1" for _ in ids()) + "\n"
    assert client.post("/v1/benchmarks/syn/scores", content=csv, headers={"content-type": "text/csv"}).status_code == 200
    for case, (override, needle) in BAD.items():
        body = {"method": "repcore", "benchmarks": ["syn"], "budget": 10, "reference_models": "all",
                "params": PARAMS, **override}
        r = client.post("/v1/coresets", json=body)
        assert r.status_code == 422, (case, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert needle.lower() in r.json()["detail"].lower(), (case, r.json())
    # "all" with only one qualifying source
    for m in range(1, len(WIDTHS)):
        assert client.delete(f"/v1/benchmarks/syn/hidden-states/src{m}").status_code == 204
    r = client.post("/v1/coresets", json={"method": "repcore", "benchmarks": ["syn"], "budget": 10,
                                         "reference_models": "all"})
    assert r.status_code == 422 and "1 qualify" in r.json()["detail"], r.text
    with committed_session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Coreset)) == 0
