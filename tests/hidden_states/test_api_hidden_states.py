"""Hidden-state uploads (RepCore, papers/003 §2.2): .npy + items, .npz, chunked storage in the
database, exact round trip, list, delete, replace, and every bad input (422, nothing stored; 413)."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

import support.helpers as helpers
from evalplan.benchmarks.service import get_benchmark
from evalplan.db.models import HiddenState, HiddenStateChunk, Model
from evalplan.hidden_states.repository import load_hidden_states
from evalplan.main import create_app
from evalplan.models.service import get_model

PROBLEM = "application/problem+json"
N_ITEMS = 12
ITEM_IDS = [f"q{i}" for i in range(N_ITEMS)]


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def npz_bytes(compressed: bool = False, **arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def setup_benchmark(client: TestClient, name: str = "hs") -> None:
    r = client.post("/v1/benchmarks", json={"name": name, "score_kind": "binary"})
    assert r.status_code == 201, r.text
    body = "\n".join(json.dumps({"id": i, "prompt": f"question {i}"}) for i in ITEM_IDS)
    r = client.post(f"/v1/benchmarks/{name}/items", content=body, headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 200, r.text


def upload(client: TestClient, model: str, content: bytes, items: list[str] | str | None = None,
           bench: str = "hs", filename: str = "states.npy"):
    data = {"model": model}
    if items is not None:
        data["items"] = items if isinstance(items, str) else json.dumps(items)
    return client.post(f"/v1/benchmarks/{bench}/hidden-states", data=data,
                       files={"file": (filename, content, "application/octet-stream")})


def load(factory, model: str, bench: str = "hs") -> np.ndarray:
    with factory() as session:
        return load_hidden_states(session, get_benchmark(session, bench), get_model(session, model))


def counts(factory) -> tuple[int, int, int]:
    with factory() as session:
        return (session.scalar(select(func.count()).select_from(HiddenState)),
                session.scalar(select(func.count()).select_from(HiddenStateChunk)),
                session.scalar(select(func.count()).select_from(Model)))


def assert_422(response, *needles: str) -> dict:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    for needle in needles:
        assert needle.lower() in body["detail"].lower(), body
    return body


def rng_states(n: int, d: int, dtype, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d)).astype(dtype)


# ------------------------------------------------------------------------ happy paths


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_npy_with_items_round_trips_exactly(client, db_session_factory, dtype) -> None:
    setup_benchmark(client)
    states = rng_states(N_ITEMS, 8, dtype)
    order = list(reversed(range(N_ITEMS)))  # rows in an order unlike the benchmark's
    r = upload(client, "m1", npy_bytes(states[order]), [ITEM_IDS[i] for i in order])
    assert r.status_code == 201, r.text
    assert r.json() == {"benchmark": "hs", "model": "m1", "id": r.json()["id"], "n_items": N_ITEMS, "dim": 8,
                        "dtype": dtype}
    assert r.json()["id"].startswith("hs_")
    loaded = load(db_session_factory, "m1")
    assert loaded.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(loaded, states)  # aligned to the benchmark's item order, bit for bit


def test_big_endian_input_is_stored_little_endian(client, db_session_factory) -> None:
    setup_benchmark(client)
    states = rng_states(N_ITEMS, 5, ">f4")
    r = upload(client, "m1", npy_bytes(states), ITEM_IDS)
    assert r.status_code == 201, r.text
    np.testing.assert_array_equal(load(db_session_factory, "m1"), states.astype("<f4"))


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_with_ids_and_states(client, db_session_factory, compressed) -> None:
    setup_benchmark(client)
    states = rng_states(N_ITEMS, 6, np.float32)
    r = upload(client, "m2", npz_bytes(compressed, ids=np.array(ITEM_IDS), states=states), filename="s.npz")
    assert r.status_code == 201, r.text
    assert r.json()["dim"] == 6
    np.testing.assert_array_equal(load(db_session_factory, "m2"), states)


def test_different_widths_per_model_and_list(client, db_session_factory) -> None:
    setup_benchmark(client)
    assert upload(client, "wide", npy_bytes(rng_states(N_ITEMS, 16, np.float16)), ITEM_IDS).status_code == 201
    assert upload(client, "narrow", npy_bytes(rng_states(N_ITEMS, 3, np.float32)), ITEM_IDS).status_code == 201
    r = client.get("/v1/benchmarks/hs/hidden-states")
    assert r.status_code == 200, r.text
    listed = {x["model"]: x for x in r.json()["items"]}
    assert set(listed) == {"wide", "narrow"}
    assert (listed["wide"]["dim"], listed["wide"]["dtype"], listed["wide"]["n_items"]) == (16, "float16", N_ITEMS)
    assert (listed["narrow"]["dim"], listed["narrow"]["dtype"]) == (3, "float32")
    assert listed["wide"]["bytes"] == N_ITEMS * 16 * 2
    assert load(db_session_factory, "wide").shape == (N_ITEMS, 16)
    assert load(db_session_factory, "narrow").shape == (N_ITEMS, 3)


def test_reupload_replaces(client, db_session_factory) -> None:
    setup_benchmark(client)
    first = upload(client, "m1", npy_bytes(rng_states(N_ITEMS, 4, np.float32, seed=1)), ITEM_IDS).json()
    second_states = rng_states(N_ITEMS, 7, np.float16, seed=2)
    second = upload(client, "m1", npy_bytes(second_states), ITEM_IDS)
    assert second.status_code == 201, second.text
    assert second.json()["id"] != first["id"]
    assert counts(db_session_factory)[0] == 1
    np.testing.assert_array_equal(load(db_session_factory, "m1"), second_states)
    assert [x["dim"] for x in client.get("/v1/benchmarks/hs/hidden-states").json()["items"]] == [7]


def test_delete(client, db_session_factory) -> None:
    setup_benchmark(client)
    assert upload(client, "m1", npy_bytes(rng_states(N_ITEMS, 4, np.float32)), ITEM_IDS).status_code == 201
    r = client.delete("/v1/benchmarks/hs/hidden-states/m1")
    assert r.status_code == 204, r.text
    assert counts(db_session_factory)[:2] == (0, 0)
    assert client.get("/v1/benchmarks/hs/hidden-states").json()["items"] == []
    r = client.delete("/v1/benchmarks/hs/hidden-states/m1")
    assert r.status_code == 404 and r.headers["content-type"].startswith(PROBLEM)
    assert client.delete("/v1/benchmarks/nope/hidden-states/m1").status_code == 404


@pytest.fixture
def chunky_client(db_session_factory, database_urls, backend) -> Iterator[TestClient]:
    """Tiny chunks (100 bytes) so that a small upload is stored as many chunks."""
    settings = helpers.settings_for(database_urls[backend], hidden_state_chunk_bytes=100)
    app = create_app(settings, session_factory=db_session_factory, dispatcher=helpers.NoJobsDispatcher())
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_streamed_in_chunks_round_trips(chunky_client, db_session_factory, kind) -> None:
    client = chunky_client
    setup_benchmark(client)
    states = rng_states(N_ITEMS, 9, np.float32)  # 36-byte rows: 2 rows per 100-byte chunk -> 6 chunks
    perm = np.random.default_rng(3).permutation(N_ITEMS)
    ids = [ITEM_IDS[i] for i in perm]
    if kind == "npy":
        r = upload(client, "m1", npy_bytes(states[perm]), ids)
    else:
        r = upload(client, "m1", npz_bytes(True, ids=np.array(ids), states=states[perm]), filename="x.npz")
    assert r.status_code == 201, r.text
    with db_session_factory() as session:
        chunks = session.execute(select(HiddenStateChunk.seq, HiddenStateChunk.row_start, HiddenStateChunk.n_rows)
                                 .order_by(HiddenStateChunk.seq)).all()
    assert [tuple(c) for c in chunks] == [(s, 2 * s, 2) for s in range(6)]
    np.testing.assert_array_equal(load(db_session_factory, "m1"), states)


def test_subset_upload_and_missing_items_are_named_on_load(client, db_session_factory) -> None:
    setup_benchmark(client)
    r = upload(client, "m1", npy_bytes(rng_states(N_ITEMS - 2, 4, np.float32)), ITEM_IDS[:-2])
    assert r.status_code == 201, r.text
    with pytest.raises(Exception) as info:
        load(db_session_factory, "m1")
    assert "q10" in str(info.value) and "q11" in str(info.value)


# ------------------------------------------------------------------------ bad input: 422, nothing stored


@pytest.fixture
def seeded(client, db_session_factory):
    setup_benchmark(client)
    assert upload(client, "keep", npy_bytes(rng_states(N_ITEMS, 4, np.float32)), ITEM_IDS).status_code == 201
    before = counts(db_session_factory)
    yield before
    assert counts(db_session_factory) == before  # nothing stored, the model "new" was not created
    np.testing.assert_array_equal(load(db_session_factory, "keep"), rng_states(N_ITEMS, 4, np.float32))


def with_nan(value: float) -> bytes:
    states = rng_states(N_ITEMS, 4, np.float32)
    states[7, 2] = value
    return npy_bytes(states)


def broken_zip() -> bytes:
    good = npz_bytes(True, ids=np.array(ITEM_IDS), states=rng_states(N_ITEMS, 64, np.float32))
    return good[: len(good) // 2]


def zip_without_states() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("ids.npy", npy_bytes(np.array(ITEM_IDS)))
    return buf.getvalue()


BAD = {
    "row count": (lambda: npy_bytes(rng_states(N_ITEMS - 1, 4, np.float32)), ITEM_IDS, "rows"),
    "unknown ids": (lambda: npy_bytes(rng_states(N_ITEMS, 4, np.float32)), ITEM_IDS[:-1] + ["zzz"], "zzz"),
    "repeated ids": (lambda: npy_bytes(rng_states(N_ITEMS, 4, np.float32)), ITEM_IDS[:-1] + ["q0"], "more than once"),
    "nan": (lambda: with_nan(np.nan), ITEM_IDS, "NaN"),
    "inf": (lambda: with_nan(np.inf), ITEM_IDS, "infinite"),
    "int dtype": (lambda: npy_bytes(np.ones((N_ITEMS, 4), dtype=np.int32)), ITEM_IDS, "dtype"),
    "float64": (lambda: npy_bytes(np.ones((N_ITEMS, 4))), ITEM_IDS, "float16 or float32"),
    "3-D": (lambda: npy_bytes(np.ones((N_ITEMS, 2, 2), dtype=np.float32)), ITEM_IDS, "2-D"),
    "1-D": (lambda: npy_bytes(np.ones(N_ITEMS, dtype=np.float32)), ITEM_IDS, "2-D"),
    "fortran": (lambda: npy_bytes(np.asfortranarray(rng_states(N_ITEMS, 4, np.float32))), ITEM_IDS, "Fortran"),
    "not numpy": (lambda: b"model,a\nm1,1\n", ITEM_IDS, "malformed"),
    "bad header": (lambda: b"\x93NUMPY\x01\x00\x10\x00{garbage}      \n", ITEM_IDS, "malformed"),
    "truncated": (lambda: npy_bytes(rng_states(N_ITEMS, 4, np.float32))[:-10], ITEM_IDS, "malformed"),
    "missing items": (lambda: npy_bytes(rng_states(N_ITEMS, 4, np.float32)), None, "items"),
    "items not json": (lambda: npy_bytes(rng_states(N_ITEMS, 4, np.float32)), "[q0, q1", "JSON"),
    "items not a list": (lambda: npy_bytes(rng_states(N_ITEMS, 4, np.float32)), '{"a": 1}', "list"),
    "npz row count": (lambda: npz_bytes(ids=np.array(ITEM_IDS[:5]), states=rng_states(N_ITEMS, 4, np.float32)), None,
                      "rows"),
    "npz unknown ids": (lambda: npz_bytes(ids=np.array(ITEM_IDS[:-1] + ["nope"]),
                                          states=rng_states(N_ITEMS, 4, np.float32)), None, "nope"),
    "npz nan": (lambda: npz_bytes(ids=np.array(ITEM_IDS), states=np.full((N_ITEMS, 4), np.nan, np.float16)), None,
                "NaN"),
    "npz without states": (zip_without_states, None, "states"),
    "npz with items field": (lambda: npz_bytes(ids=np.array(ITEM_IDS), states=rng_states(N_ITEMS, 4, np.float32)),
                             ITEM_IDS, "items"),
    "broken npz": (broken_zip, None, "malformed"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_422_and_stores_nothing(client, seeded, case) -> None:
    make, items, needle = BAD[case]
    assert_422(upload(client, "new", make(), items), needle)


def test_unknown_benchmark_is_404(client, seeded) -> None:
    r = upload(client, "new", npy_bytes(rng_states(N_ITEMS, 4, np.float32)), ITEM_IDS, bench="nope")
    assert r.status_code == 404


def test_missing_file_or_model_is_422(client, seeded) -> None:
    r = client.post("/v1/benchmarks/hs/hidden-states", data={"model": "new", "items": json.dumps(ITEM_IDS)})
    assert r.status_code == 422
    r = client.post("/v1/benchmarks/hs/hidden-states", data={"items": json.dumps(ITEM_IDS)},
                    files={"file": ("a.npy", npy_bytes(rng_states(N_ITEMS, 4, np.float32)))})
    assert r.status_code == 422


@pytest.fixture
def small_client(db_session_factory, database_urls, backend) -> Iterator[TestClient]:
    settings = helpers.settings_for(database_urls[backend], max_upload_bytes=2000)
    app = create_app(settings, session_factory=db_session_factory, dispatcher=helpers.NoJobsDispatcher())
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_over_the_size_limit_is_413(small_client, db_session_factory) -> None:
    setup_benchmark(small_client)
    before = counts(db_session_factory)
    r = upload(small_client, "m1", npy_bytes(rng_states(N_ITEMS, 64, np.float32)), ITEM_IDS)
    assert r.status_code == 413, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    assert counts(db_session_factory) == before


def test_an_npz_whose_ids_inflate_past_the_bound_is_413(client, db_session_factory, monkeypatch) -> None:
    """Issue 32 item 2: ``ids`` is loaded whole (``states`` streams), so its declared size is bounded first:
    a small compressed member could otherwise inflate to GBs in the serving process."""
    from evalplan.hidden_states import npy_format

    monkeypatch.setattr(npy_format, "MAX_IDS_BYTES", 100_000)
    setup_benchmark(client)
    ids = np.array([f"q{i % N_ITEMS}" for i in range(50_000)])  # 50,000 x U4: 800 KB, a few KB compressed
    states = np.zeros((50_000, 2), dtype=np.float32)
    r = upload(client, "m-bomb", npz_bytes(True, ids=ids, states=states), filename="b.npz")
    assert r.status_code == 413, r.text
    assert r.json()["errors"][0]["member"] == "ids.npy"
    with db_session_factory() as s:
        assert s.scalar(select(func.count()).select_from(HiddenState)) == 0
