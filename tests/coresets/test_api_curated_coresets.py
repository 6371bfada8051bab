"""Curated coresets (API.md "Curated coresets"): versions per name, name@version, publish (frozen),
deprecate, delete, diff, provenance, stale, reproducible predict, and the version race. SQLite and
PostgreSQL."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from evalplan.main import create_app
from support.helpers import assert_problem, settings_for, upload_items, upload_matrix, upload_score_cells, wait_for_job

N_MODELS, N_ITEMS = 14, 40
MODELS = [f"m{i:02d}" for i in range(N_MODELS)]
ITEMS = [f"q{j:02d}" for j in range(N_ITEMS)]


def setup_benchmark(client: TestClient, name: str = "reason") -> np.ndarray:
    rng = np.random.default_rng(3)
    values = (rng.random((N_MODELS, N_ITEMS)) < rng.uniform(0.2, 0.9, (N_MODELS, 1))).astype(float)
    upload_matrix(client, name, values, MODELS, ITEMS)
    return values


def make(client: TestClient, name: str | None = "reasoning", *, budget: int = 6, seed: int = 0,
         bench: str = "reason") -> dict[str, Any]:
    body: dict[str, Any] = {"method": "anchor_points", "benchmarks": [bench], "budget": budget,
                            "reference_models": MODELS[:12], "seed": seed}
    if name:
        body["name"] = name
    r = client.post("/v1/coresets", json=body)
    assert r.status_code == 202, r.text
    assert wait_for_job(client, r.json()["job"]["id"], timeout=120)["status"] == "succeeded"
    out: dict[str, Any] = client.get(f"/v1/coresets/{r.json()['coreset']['id']}").json()
    return out


def test_versions_and_name_at_version(committed_client: TestClient) -> None:
    c = committed_client
    setup_benchmark(c)
    v1, v2 = make(c, seed=0), make(c, seed=1)
    assert (v1["version"], v2["version"]) == (1, 2)
    assert c.get("/v1/coresets/reasoning@1").json()["id"] == v1["id"]
    assert c.get("/v1/coresets/reasoning@latest").json()["id"] == v2["id"]
    assert c.get("/v1/coresets/local%2Freasoning@1").json()["id"] == v1["id"]
    for ref in ("reasoning@3", "reasoning@x", "other@latest"):
        assert_problem(c.get(f"/v1/coresets/{ref}"), 404)
    assert c.get("/v1/coresets/reasoning@1/export", params={"format": "csv"}).status_code == 200
    r = c.post("/v1/coresets", json={"name": "bad@name", "method": "anchor_points", "benchmarks": ["reason"],
                                     "budget": 4, "reference_models": MODELS[:12]})
    assert_problem(r, 422)


def test_publish_freezes_and_delete_rules(committed_client: TestClient) -> None:
    c = committed_client
    setup_benchmark(c)
    v1, v2 = make(c, seed=0), make(c, seed=1)
    r = c.post("/v1/coresets/reasoning@1/publish")
    assert r.status_code == 200, r.text
    published = r.json()
    assert published["published_at"] and published["published_by"] == "local"
    assert c.post("/v1/coresets/reasoning@1/publish").json()["published_at"] == published["published_at"]
    assert_problem(c.delete("/v1/coresets/reasoning@1"), 409)
    assert c.get(f"/v1/coresets/{v1['id']}").status_code == 200
    assert_problem(c.post("/v1/coresets/reasoning@2/deprecate", json={"message": "x"}), 409)  # not published
    d = c.post("/v1/coresets/reasoning@1/deprecate", json={"message": "use v3: q07 was mislabeled"})
    assert d.status_code == 200 and d.json()["deprecated"] and "mislabeled" in d.json()["deprecation_message"]
    assert c.get("/v1/coresets/reasoning@1").json()["deprecation_message"] == "use v3: q07 was mislabeled"
    assert c.delete("/v1/coresets/reasoning@2").status_code == 204
    assert_problem(c.get(f"/v1/coresets/{v2['id']}"), 404)
    assert c.get("/v1/coresets/reasoning@latest").json()["id"] == v1["id"]
    assert make(c, seed=2)["version"] == 2  # 1 + the latest existing version (API.md)
    actions = [(e["action"], e["resource_type"]) for e in c.get("/v1/audit").json()["items"]]
    for expected in [("create", "coreset"), ("publish", "coreset"), ("deprecate", "coreset"), ("delete", "coreset")]:
        assert expected in actions


def test_diff_lists_added_and_removed_items(committed_client: TestClient) -> None:
    c = committed_client
    setup_benchmark(c)
    a, b = make(c, seed=0, budget=6), make(c, seed=5, budget=10)
    r = c.get("/v1/coresets/reasoning@2/diff", params={"against": "reasoning@1"})
    assert r.status_code == 200, r.text
    body = r.json()
    items_a = {i["item"] for i in a["items"]}
    items_b = {i["item"] for i in b["items"]}
    assert {x["item"] for x in body["added"]} == items_b - items_a
    assert {x["item"] for x in body["removed"]} == items_a - items_b
    assert body["n_common"] == len(items_a & items_b)
    assert set(body["benchmarks"]) <= {"reason"}
    assert_problem(c.get("/v1/coresets/reasoning@2/diff", params={"against": "nope@1"}), 404)


def test_provenance_stale_and_frozen_predict(committed_client: TestClient) -> None:
    c = committed_client
    values = setup_benchmark(c)
    v1 = make(c)
    prov = v1["provenance"]
    for key in ("method", "params", "seed", "reference_models", "data_versions", "data_hash", "service_version",
                "created_by"):
        assert key in prov, key
    bench_id = c.get("/v1/benchmarks/reason").json()["id"]
    assert prov["method"] == "anchor_points" and prov["reference_models"] == MODELS[:12]
    assert prov["data_versions"] == {bench_id: 1} and len(prov["data_hash"][bench_id]) == 64
    c.post("/v1/coresets/reasoning@1/publish")
    target = [{"benchmark": "reason", "item": i["item"], "score": float(values[13, ITEMS.index(i["item"])])}
              for i in v1["items"]]
    before = c.post("/v1/coresets/reasoning@1/predict", json={"scores": target}).json()
    assert c.get("/v1/coresets/reasoning@1").json()["stale"] is False
    # the source data changes: a reference model's scores are re-uploaded with other values
    upload_score_cells(c, "reason", [{"model": MODELS[0], "item": it, "score": 1.0 - float(values[0, j])}
                                     for j, it in enumerate(ITEMS)])
    now = c.get("/v1/coresets/reasoning@1").json()
    assert now["stale"] is True
    changes = now["stale_changes"]
    assert [(x["benchmark"], x["change"]) for x in changes] == [("reason", "data_hash"), ("reason", "scores")]
    assert changes[0]["was"] == prov["data_hash"][bench_id] and changes[0]["now"] != changes[0]["was"]
    assert (changes[1]["data_version_was"], changes[1]["data_version_now"]) == (1, 2)
    assert now["items"] == c.get(f"/v1/coresets/{v1['id']}").json()["items"]
    for _ in range(2):  # reproducible: the frozen predictor, the same numbers every time
        again = c.post("/v1/coresets/reasoning@1/predict", json={"scores": target}).json()
        assert again["benchmarks"] == before["benchmarks"] and again["overall"] == before["overall"]


class QueueOnly:
    """Jobs stay queued: the race below is between the creates alone."""

    def submit(self, job_id: str, queue: str) -> None:
        pass


def test_concurrent_creates_get_consecutive_versions(committed_session_factory: Any, database_urls: dict[str, str],
                                                     backend: str) -> None:
    app = create_app(settings_for(database_urls[backend]), session_factory=committed_session_factory,
                     dispatcher=QueueOnly())
    c = TestClient(app, raise_server_exceptions=False)
    setup_benchmark(c)
    n = 8
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def create(k: int) -> None:
        barrier.wait()
        results[k] = c.post("/v1/coresets", json={"name": "race", "method": "anchor_points",
                                                  "benchmarks": ["reason"], "budget": 4,
                                                  "reference_models": MODELS[:12], "seed": k})

    threads = [threading.Thread(target=create, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.status_code == 202 for r in results), [r.text for r in results if r.status_code != 202]
    versions = sorted(c.get(f"/v1/coresets/{r.json()['coreset']['id']}").json()["version"] for r in results)
    assert versions == list(range(1, n + 1))


def test_delete_refused_while_a_published_coreset_depends(committed_client: TestClient,
                                                          committed_session_factory: Any) -> None:
    from evalplan.db.models import Benchmark, Coreset, EvalSession, Item, Model, Score
    from support.helpers import count_rows

    c = committed_client
    setup_benchmark(c)
    setup_benchmark(c, "scratch")
    make(c, name="pinned")
    unpublished = make(c, name="draft", bench="scratch")
    c.post("/v1/coresets/pinned@1/publish")
    s = c.post("/v1/sessions", json={"benchmark": "scratch", "target": MODELS[13], "reference_models": MODELS[:12]})
    assert s.status_code == 201, s.text
    before = count_rows(committed_session_factory, Benchmark, Item, Score, Model, Coreset, EvalSession)
    body = assert_problem(c.delete("/v1/benchmarks/reason"), 409)
    assert "published" in body["detail"]
    assert_problem(c.delete(f"/v1/models/{MODELS[0]}"), 409)  # a reference of the published coreset
    assert count_rows(committed_session_factory, Benchmark, Item, Score, Model, Coreset, EvalSession) == before
    # nothing depends on 'scratch' but its own draft coreset and a session: all go, nothing half-deleted
    assert c.delete("/v1/benchmarks/scratch").status_code == 204
    assert_problem(c.get("/v1/benchmarks/scratch"), 404)
    assert_problem(c.get(f"/v1/coresets/{unpublished['id']}"), 404)
    assert_problem(c.get(f"/v1/sessions/{s.json()['id']}"), 404)
    after = count_rows(committed_session_factory, Benchmark, Item, Score, Model, Coreset, EvalSession)
    assert after == (before[0] - 1, before[1] - N_ITEMS, before[2] - N_ITEMS * N_MODELS, before[3], before[4] - 1,
                     before[5] - 1)
    # a model no published coreset uses: its scores go and its benchmarks get a new data version
    c.post("/v1/models", json={"name": "lonely"})
    upload_score_cells(c, "reason", [{"model": "lonely", "item": "q00", "score": 1}])
    version = c.get("/v1/benchmarks/reason").json()["data_version"]
    assert c.delete("/v1/models/lonely").status_code == 204
    assert_problem(c.get("/v1/models/lonely"), 404)
    assert c.get("/v1/benchmarks/reason").json()["data_version"] == version + 1
    # a session
    s2 = c.post("/v1/sessions", json={"benchmark": "reason", "target": MODELS[13], "reference_models": MODELS[:12]})
    assert c.delete(f"/v1/sessions/{s2.json()['id']}").status_code == 204
    assert_problem(c.get(f"/v1/sessions/{s2.json()['id']}"), 404)
    assert_problem(c.delete(f"/v1/sessions/{s2.json()['id']}"), 404)
    actions = [(e["action"], e["resource_type"]) for e in c.get("/v1/audit").json()["items"]]
    assert ("delete", "benchmark") in actions and ("delete", "model") in actions and ("delete", "session") in actions


# --------------------------------------------------------------------------- frozen state and the content hash


def test_stale_compares_the_content_hash(committed_client: TestClient) -> None:
    """An item's text edited with no score change is stale; the same scores re-uploaded are not; a
    version whose data already changed cannot be published."""
    c = committed_client
    values = setup_benchmark(c)
    v1 = make(c)
    bench_id = c.get("/v1/benchmarks/reason").json()["id"]
    assert set(v1["provenance"]["items_hash"]) == {bench_id}
    assert c.post("/v1/coresets/reasoning@1/publish").status_code == 200
    # identical scores again: data_version moves, the content does not
    upload_score_cells(c, "reason", [{"model": MODELS[0], "item": it, "score": float(values[0, j])}
                                     for j, it in enumerate(ITEMS)])
    assert c.get("/v1/benchmarks/reason").json()["data_version"] == 2
    same = c.get("/v1/coresets/reasoning@1").json()
    assert same["stale"] is False and same["stale_changes"] == []
    # an item's text edited, no score touched
    assert upload_items(c, "reason", [{"id": ITEMS[3], "prompt": "reworded question"}])["updated"] == 1
    edited = c.get("/v1/coresets/reasoning@1").json()
    assert edited["stale"] is True
    assert [x["change"] for x in edited["stale_changes"]] == ["data_hash", "items"]
    # a version made before the edit cannot be published now (its frozen state would not match its provenance)
    v2 = make(c, seed=1)
    upload_items(c, "reason", [{"id": ITEMS[3], "prompt": "reworded again"}])
    body = assert_problem(c.post(f"/v1/coresets/{v2['id']}/publish"), 409)
    assert "create a new version" in body["detail"] and body["errors"][0]["change"] == "data_hash"
    assert c.get(f"/v1/coresets/{v2['id']}").json()["published_at"] is None
    assert c.post(f"/v1/coresets/{make(c, seed=2)['id']}/publish").status_code == 200  # a fresh version publishes


TEXT_ITEMS = [f"t{j:02d}" for j in range(30)]


def test_published_text_coreset_predicts_from_its_frozen_state(committed_client: TestClient) -> None:
    """Text coresets read the item count (finite-population interval) and the references' coreset
    means (extrapolation): a published version keeps them; an unpublished twin moves."""
    c = committed_client
    rng = np.random.default_rng(7)
    values = (rng.random((8, len(TEXT_ITEMS))) < np.linspace(0.2, 0.8, 8)[:, None]).astype(float)
    refs = [f"r{i}" for i in range(8)]
    upload_matrix(c, "texty", values, refs, TEXT_ITEMS)
    ids = {}
    for name in ("frozen-text", "live-text"):
        r = c.post("/v1/coresets", json={"name": name, "method": "random", "benchmarks": ["texty"], "budget": 6,
                                         "reference_models": refs[:6], "seed": 4})
        assert r.status_code == 202, r.text
        assert wait_for_job(c, r.json()["job"]["id"], timeout=300)["status"] == "succeeded"
        ids[name] = r.json()["coreset"]["id"]
    assert c.post("/v1/coresets/frozen-text@1/publish").status_code == 200
    chosen = [i["item"] for i in c.get(f"/v1/coresets/{ids['frozen-text']}").json()["items"]]
    # a target just above the references' best coreset mean (extrapolation), then the data changes
    target = [{"benchmark": "texty", "item": it, "score": 1.0} for it in chosen]
    before = {n: c.post(f"/v1/coresets/{ids[n]}/predict", json={"scores": target}).json() for n in ids}
    assert before["frozen-text"]["extrapolation"] is True
    assert before["frozen-text"]["benchmarks"] == before["live-text"]["benchmarks"]
    upload_score_cells(c, "texty", [{"model": refs[0], "item": it, "score": 1.0} for it in chosen])
    upload_items(c, "texty", [f"extra{j}" for j in range(30)])  # the population doubles
    after = {n: c.post(f"/v1/coresets/{ids[n]}/predict", json={"scores": target}).json() for n in ids}
    assert after["frozen-text"] == before["frozen-text"]  # the same numbers, the same flag
    assert after["live-text"]["extrapolation"] is False  # r0 now scores 1.0 on the coreset: inside
    live = after["live-text"]["benchmarks"]["texty"]
    assert live["interval"] != before["live-text"]["benchmarks"]["texty"]["interval"]  # N = 60 now
    stale = c.get("/v1/coresets/frozen-text@1").json()
    assert stale["stale"] is True
    assert {x["change"] for x in stale["stale_changes"]} == {"data_hash", "items", "n_items", "scores"}


def test_published_hidden_state_coreset_predicts_from_its_frozen_state(committed_client: TestClient) -> None:
    """RepCore reads the sources' correctness on every item (eq. 6's x, the LOO interval): a published
    version keeps the matrix of its publish; an unpublished twin follows the new scores."""
    from test_api_repcore import ids as repcore_ids
    from test_api_repcore import upload_suite

    from evalplan.core.repcore.synthetic import make_synthetic_suite

    c = committed_client
    suite = make_synthetic_suite(n_items=200, n_sources=5, n_targets=1, widths=[16, 24, 12, 20, 32], seed=0)
    upload_suite(c, suite)
    made = {}
    for name in ("frozen-rep", "live-rep"):
        r = c.post("/v1/coresets", json={"name": name, "method": "repcore", "benchmarks": ["syn"], "budget": 12,
                                         "reference_models": "all", "params": {"input": "correctness"}})
        assert r.status_code == 202, r.text
        assert wait_for_job(c, r.json()["job"]["id"], timeout=300)["status"] == "succeeded"
        made[name] = c.get(f"/v1/coresets/{r.json()['coreset']['id']}").json()
    assert c.post("/v1/coresets/frozen-rep@1/publish").status_code == 200
    item_ids = repcore_ids()
    target_row = suite.target_correctness[0]
    scores = {n: [{"benchmark": "syn", "item": i["item"], "score": float(target_row[item_ids.index(i["item"])])}
                  for i in made[n]["items"]] for n in made}
    before = {n: c.post(f"/v1/coresets/{made[n]['id']}/predict", json={"scores": scores[n]}).json() for n in made}
    # every source now fails every item it passed on the first half of the benchmark
    flips = [{"model": f"src{m}", "item": it, "score": 0.0} for m in range(5) for it in item_ids[:100]]
    upload_score_cells(c, "syn", flips)
    after = {n: c.post(f"/v1/coresets/{made[n]['id']}/predict", json={"scores": scores[n]}).json() for n in made}
    assert after["frozen-rep"] == before["frozen-rep"]
    assert after["live-rep"]["overall"] != before["live-rep"]["overall"]
    stale = c.get("/v1/coresets/frozen-rep@1").json()
    assert stale["stale"] is True and [x["change"] for x in stale["stale_changes"]] == ["data_hash", "scores"]
