"""Item-text embeddings with the real packaged all-MiniLM-L6-v2 (offline): the embedder, the cache
by (text hash, model), truncation counts, loading for coresets, and ``POST /v1/embeddings``."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from evalplan.benchmarks import items as item_service
from evalplan.benchmarks import service as benchmark_service
from evalplan.benchmarks.items import ItemRecord
from evalplan.benchmarks.service import get_benchmark
from evalplan.core.embedding import embedder as embedder_module
from evalplan.core.embedding.embedder import PACKAGED_MODEL, Embedder, load_embedder
from evalplan.core.embedding.embedding_text import item_text, text_hash
from evalplan.db.models import Embedding, Item
from evalplan.embeddings.repository import load_embeddings
from evalplan.embeddings.service import ensure_embeddings
from evalplan.kit.errors import InvalidInput, NotFound
from support.helpers import assert_problem, create_benchmark, upload_items, wait_for_job

NDJSON = {"content-type": "application/x-ndjson"}
LONG_PROMPT = " ".join(f"word{i} is followed by another word" for i in range(120))  # well over 256 tokens

ITEMS = [
    {"id": "q1", "prompt": "What is 2+2?", "target": "4"},
    {"id": "q2", "prompt": "Capital of France?", "target": "Paris"},
    {"id": "q3", "prompt": "Name a prime number.", "target": "7", "fields": {"solution": "7 has no divisors"}},
    {"id": "q4", "prompt": "What is 2+2?", "target": "4"},  # the same text as q1: embedded once
    {"id": "q5", "prompt": "Translate 'cat' to French.", "target": "chat"},
    {"id": "q6", "prompt": "Is the sky blue?", "target": "yes"},
    {"id": "q7", "prompt": "Sort [3, 1, 2].", "target": "[1, 2, 3]"},
    {"id": "q8", "prompt": "Who wrote Hamlet?", "target": "Shakespeare"},
]
N_UNIQUE = len(ITEMS) - 1


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return load_embedder(PACKAGED_MODEL, "cpu")


def make_benchmark(factory: sessionmaker[Session], name: str, items: list[dict], *,
                   embedding_fields: list[str] | None = None, score_only: list[str] = ()) -> str:
    with factory() as session:
        bench = benchmark_service.create_benchmark(session, name=name, embedding_fields=embedding_fields)
        if items:
            item_service.upsert_items(session, bench, [
                ItemRecord(r["id"], r["prompt"], r.get("target"), r.get("fields")) for r in items])
        if score_only:
            item_service.ensure_items(session, bench, list(score_only))
        session.commit()
        return bench.id


def n_embedding_rows(factory: sessionmaker[Session]) -> int:
    with factory() as session:
        return session.scalar(select(func.count()).select_from(Embedding))


# ----------------------------------------------------------------------------- the embedder (core)

def test_packaged_model_is_384_d_with_a_256_token_limit(embedder: Embedder) -> None:
    assert embedder.dim == 384
    assert embedder.max_seq_length == 256
    assert embedder.device == "cpu"
    assert load_embedder(PACKAGED_MODEL, "cpu") is embedder  # loaded once per process


def test_encode_is_normalized_float32_in_input_order(embedder: Embedder) -> None:
    texts = [r["prompt"] for r in ITEMS] + ["x" * 5, LONG_PROMPT]
    calls: list[tuple[int, int]] = []
    vectors = embedder.encode(texts, batch_size=3, progress=lambda done, total: calls.append((done, total)))
    assert vectors.dtype == np.float32 and vectors.shape == (len(texts), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    direct = embedder.model.encode(texts, batch_size=64, normalize_embeddings=True)
    np.testing.assert_allclose(vectors, direct, atol=1e-5)  # sorting by length, then restoring order
    assert calls == [(3, 10), (6, 10), (9, 10), (10, 10)]
    assert embedder.encode([]).shape == (0, 384)


def test_token_counts_see_past_the_limit(embedder: Embedder) -> None:
    counts = embedder.token_counts(["hello world", LONG_PROMPT])
    assert counts[0] == 4  # [CLS] hello world [SEP]
    assert counts[1] > 256
    assert embedder.truncated(counts).tolist() == [False, True]


def test_concurrent_first_loads_share_one_model(monkeypatch: pytest.MonkeyPatch, embedder: Embedder) -> None:
    loads: list[str] = []

    def fake_load(name: str, device: str):  # noqa: ANN202
        loads.append(name)
        return embedder.model

    monkeypatch.setattr(embedder_module, "_load_model", fake_load)
    got: list[Embedder] = []
    threads = [threading.Thread(target=lambda: got.append(load_embedder("fake-model-for-test", "cpu")))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loads == ["fake-model-for-test"] and len({id(e) for e in got}) == 1
    embedder_module._cache.pop(("fake-model-for-test", "cpu"), None)


class FakeModel:
    max_seq_length = 8

    def get_embedding_dimension(self) -> int:
        return 3


def test_embedder_cache_keeps_the_four_most_recently_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedder_module, "_cache", type(embedder_module._cache)(maxsize=embedder_module.CACHE_SIZE))
    loads: list[tuple[str, str]] = []
    monkeypatch.setattr(embedder_module, "_load_model", lambda name, device: loads.append((name, device)) or FakeModel())
    cuda = load_embedder("m", "cuda")
    cpu = load_embedder("m", "cpu")
    assert embedder_module.loaded_embedder("m") is cpu  # the most recently used device first
    assert load_embedder("m", "cuda") is cuda and embedder_module.loaded_embedder("m") is cuda
    assert embedder_module.loaded_embedder("m", "cpu") is cpu  # a look, not a use
    for name in ("a", "b", "c"):
        load_embedder(name, "cpu")
    assert embedder_module.loaded_embedder("m", "cpu") is None  # the least recently used left
    assert embedder_module.loaded_embedder("m", "cuda") is cuda and embedder_module.loaded_embedder("x") is None
    assert loads == [("m", "cuda"), ("m", "cpu"), ("a", "cpu"), ("b", "cpu"), ("c", "cpu")]


# ----------------------------------------------------------------------------- the service

def test_ensure_embeds_each_distinct_text_once_then_nothing(
        committed_session_factory: sessionmaker[Session], embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    factory = committed_session_factory
    bench_id = make_benchmark(factory, "qa", ITEMS, score_only=["s1", "s2"])
    fractions: list[float] = []
    summary = ensure_embeddings(factory, [bench_id], PACKAGED_MODEL, progress=fractions.append, device="cpu")
    assert summary["model"] == PACKAGED_MODEL and summary["dim"] == 384 and summary["device"] == "cpu"
    assert summary["benchmarks"] == ["qa"]
    assert (summary["n_items"], summary["n_without_text"], summary["n_texts"]) == (len(ITEMS) + 2, 2, len(ITEMS))
    assert (summary["n_cached"], summary["n_embedded"], summary["n_unique_texts"]) == (0, N_UNIQUE, N_UNIQUE)
    assert summary["n_truncated"] == 0 and summary["truncated_items"] == []
    assert summary["max_seq_length"] == 256 and summary["seconds"] >= 0
    assert fractions == sorted(fractions) and 0 < fractions[-1] < 1
    assert n_embedding_rows(factory) == N_UNIQUE

    with factory() as session:
        pks, index, vectors = load_embeddings(session, ["qa"], PACKAGED_MODEL)
        item_pks = list(session.scalars(select(Item.pk).where(Item.benchmark_id == bench_id,
                                                              Item.prompt.is_not(None)).order_by(Item.pk)))
        row = session.scalars(select(Embedding).limit(1)).one()
    assert pks.tolist() == item_pks and index.tolist() == [0] * len(ITEMS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(ITEMS), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(vectors[0], vectors[3])  # q1 and q4 share one stored vector
    texts = [item_text(r["prompt"], r.get("target"), r.get("fields"), []) for r in ITEMS]
    np.testing.assert_allclose(vectors, embedder.model.encode(texts, normalize_embeddings=True), atol=1e-5)
    assert row.dim == 384 and len(row.vector) == 384 * 4 and row.n_tokens and not row.truncated

    def no_model(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a fully cached ensure must not load or run the model")

    monkeypatch.setattr(embedder_module, "load_embedder", no_model)
    again = ensure_embeddings(factory, ["qa"], PACKAGED_MODEL, device="cpu")
    assert (again["n_embedded"], again["n_cached"], again["dim"]) == (0, len(ITEMS), 384)
    assert n_embedding_rows(factory) == N_UNIQUE


def test_changing_one_prompt_re_embeds_only_that_item(committed_session_factory: sessionmaker[Session]) -> None:
    factory = committed_session_factory
    bench_id = make_benchmark(factory, "qa", ITEMS)
    ensure_embeddings(factory, [bench_id], PACKAGED_MODEL, device="cpu")
    with factory() as session:
        bench = get_benchmark(session, bench_id)
        item_service.upsert_items(session, bench, [ItemRecord("q2", "Capital of Italy?", "Rome", None)])
        session.commit()
    summary = ensure_embeddings(factory, [bench_id], PACKAGED_MODEL, device="cpu")
    assert (summary["n_embedded"], summary["n_cached"]) == (1, len(ITEMS) - 1)
    assert n_embedding_rows(factory) == N_UNIQUE + 1


def test_the_same_text_elsewhere_is_cached_and_embedding_fields_count(
        committed_session_factory: sessionmaker[Session]) -> None:
    factory = committed_session_factory
    make_benchmark(factory, "a", ITEMS)
    ensure_embeddings(factory, ["a"], PACKAGED_MODEL, device="cpu")
    make_benchmark(factory, "renamed-copy", ITEMS)
    copy = ensure_embeddings(factory, ["renamed-copy"], PACKAGED_MODEL, device="cpu")
    assert (copy["n_embedded"], copy["n_cached"]) == (0, len(ITEMS))
    # With `solution` configured, only q3 (the item that has it) gets a new text.
    make_benchmark(factory, "with-solution", ITEMS, embedding_fields=["solution"])
    both = ensure_embeddings(factory, ["a", "with-solution"], PACKAGED_MODEL, device="cpu")
    assert (both["n_embedded"], both["n_cached"], both["n_texts"]) == (1, 2 * len(ITEMS) - 1, 2 * len(ITEMS))
    with factory() as session:
        pks, index, vectors = load_embeddings(session, ["with-solution", "a"], PACKAGED_MODEL)
    assert index.tolist() == [0] * len(ITEMS) + [1] * len(ITEMS)
    assert not np.allclose(vectors[2], vectors[len(ITEMS) + 2])  # q3 with vs without its solution
    np.testing.assert_array_equal(vectors[1], vectors[len(ITEMS) + 1])


def test_long_texts_are_counted_as_truncated(committed_session_factory: sessionmaker[Session]) -> None:
    factory = committed_session_factory
    make_benchmark(factory, "long", ITEMS[:2] + [{"id": "essay", "prompt": LONG_PROMPT}])
    summary = ensure_embeddings(factory, ["long"], PACKAGED_MODEL, device="cpu")
    assert summary["n_truncated"] == 1
    [entry] = summary["truncated_items"]
    assert entry["benchmark"] == "long" and entry["item"] == "essay" and entry["n_tokens"] > 256
    with factory() as session:
        row = session.scalars(select(Embedding).where(Embedding.text_hash == text_hash(LONG_PROMPT))).one()
    assert row.truncated and row.n_tokens > 256
    again = ensure_embeddings(factory, ["long"], PACKAGED_MODEL, device="cpu")  # reported from the cache too
    assert again["n_embedded"] == 0 and again["n_truncated"] == 1


def test_concurrent_ensures_store_each_text_once(committed_session_factory: sessionmaker[Session]) -> None:
    factory = committed_session_factory
    make_benchmark(factory, "qa", ITEMS)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            ensure_embeddings(factory, ["qa"], PACKAGED_MODEL, device="cpu")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and n_embedding_rows(factory) == N_UNIQUE


def test_missing_embeddings_and_textless_benchmarks_are_named(committed_session_factory: sessionmaker[Session]) -> None:
    factory = committed_session_factory
    make_benchmark(factory, "not-yet", ITEMS[:2])
    make_benchmark(factory, "scores-only", [], score_only=["a", "b"])
    with factory() as session:
        with pytest.raises(InvalidInput, match="not-yet"):
            load_embeddings(session, ["not-yet"], PACKAGED_MODEL)
        with pytest.raises(InvalidInput, match="scores-only"):
            load_embeddings(session, ["scores-only"], PACKAGED_MODEL)
        with pytest.raises(NotFound):
            load_embeddings(session, ["nope"], PACKAGED_MODEL)
    with pytest.raises(InvalidInput, match="scores-only"):
        ensure_embeddings(factory, ["not-yet", "scores-only"], PACKAGED_MODEL, device="cpu")
    with pytest.raises(InvalidInput, match="could not load embedding model"):
        ensure_embeddings(factory, ["not-yet"], "/nonexistent/model/folder", device="cpu")
    assert n_embedding_rows(factory) == 0


# ----------------------------------------------------------------------------- HTTP

def upload(client, name: str, items: list[dict]) -> None:
    create_benchmark(client, name)
    upload_items(client, name, items)




def test_post_embeddings_runs_a_gpu_queue_job(committed_client) -> None:
    upload(committed_client, "qa", ITEMS)
    r = committed_client.post("/v1/embeddings", json={"benchmarks": ["qa"]})
    assert r.status_code == 202, r.text
    job_ref = r.json()["job"]
    assert set(job_ref) == {"id", "status"} and r.headers["location"] == f"/v1/jobs/{job_ref['id']}"
    job = wait_for_job(committed_client, job_ref["id"], timeout=120)
    assert job["status"] == "succeeded", job
    assert (job["kind"], job["queue"], job["progress"]) == ("embed", "gpu", 1.0)
    result = job["result"]
    assert (result["model"], result["dim"], result["n_items"]) == (PACKAGED_MODEL, 384, len(ITEMS))
    assert (result["n_embedded"], result["n_cached"], result["n_truncated"]) == (N_UNIQUE, 0, 0)
    assert result["max_seq_length"] == 256

    bench_id = committed_client.get("/v1/benchmarks/qa").json()["id"]
    r = committed_client.post("/v1/embeddings", json={"benchmarks": [bench_id, "qa"], "model": PACKAGED_MODEL})
    again = wait_for_job(committed_client, r.json()["job"]["id"], timeout=120)
    assert again["status"] == "succeeded", again
    assert (again["result"]["n_embedded"], again["result"]["n_cached"]) == (0, len(ITEMS))


def test_post_embeddings_with_an_unloadable_model_fails_the_job(committed_client) -> None:
    """An allow-listed model that does not load fails the job with a 422 that shows no server detail."""
    upload(committed_client, "qa", ITEMS[:1])
    settings = committed_client.app.state.settings
    committed_client.app.state.settings = settings.model_copy(
        update={"embedding_models": ["/nonexistent/model/folder"]})
    r = committed_client.post("/v1/embeddings", json={"benchmarks": ["qa"], "model": "/nonexistent/model/folder"})
    job = wait_for_job(committed_client, r.json()["job"]["id"], timeout=120)
    assert job["status"] == "failed" and job["error"]["status"] == 422
    assert "could not load embedding model" in job["error"]["detail"]
    assert "OSError" not in str(job["error"]) and "No such file" not in str(job["error"])


@pytest.mark.parametrize("name", ["/etc/passwd", "/etc", "../../etc/hosts", "sentence-transformers/all-mpnet-base-v2"])
def test_embedding_models_come_from_the_allow_list_only(client, name: str) -> None:
    """Any name or path not configured is refused before anything is loaded, and the error never
    says what exists on the server (no "is a file" / "not a directory" probing)."""
    for route, body in (("/v1/embeddings", {"benchmarks": ["x"], "model": name}),
                        ("/v1/coresets", {"method": "random", "benchmarks": ["x"], "budget": 1,
                                          "embedding_model": name})):
        problem = assert_problem(client.post(route, json=body), 422)
        text = json.dumps(problem)
        assert "not configured" in problem["detail"]
        for leak in ("is a file", "directory", "No such file", "passwd:", "root:"):
            assert leak not in text


def test_post_embeddings_rejects_bad_requests(client) -> None:
    body = assert_problem(client.post("/v1/embeddings", json={"benchmarks": ["nope"]}), 404)
    assert "nope" in body["detail"]
    assert_problem(client.post("/v1/embeddings", json={"benchmarks": []}), 422)
    assert_problem(client.post("/v1/embeddings", json={}), 422)
    assert_problem(client.post("/v1/embeddings", json={"benchmarks": ["x"], "extra": 1}), 422)
    assert_problem(client.post("/v1/embeddings", json={"benchmarks": ["x"], "model": ""}), 422)

    assert client.post("/v1/benchmarks", json={"name": "empty"}).status_code == 201
    body = assert_problem(client.post("/v1/embeddings", json={"benchmarks": ["empty"]}), 422)
    assert "empty" in body["detail"]
    assert client.post("/v1/benchmarks", json={"name": "scored"}).status_code == 201
    r = client.post("/v1/benchmarks/scored/scores", content=b"model,i1,i2\nm,1,0\n", headers={"content-type": "text/csv"})
    assert r.status_code == 200, r.text
    upload(client, "fine", ITEMS[:1])
    body = assert_problem(client.post("/v1/embeddings", json={"benchmarks": ["fine", "scored"]}), 422)
    assert "scored" in body["detail"] and body["errors"][0]["benchmark"] == "scored"
