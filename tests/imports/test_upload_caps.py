"""Issue 24 item 8: memory caps. A wide CSV naming 1,000,000 items (2 rows) and an inspect ``.eval`` zip
whose ``header.json`` decompresses to far more than its size are refused with 413 before the data is
materialised; the Python-side peak (tracemalloc, numpy included) stays under 300 MB and nothing is stored."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import Benchmark, Item, Model, Score
from evalplan.kit.errors import PayloadTooLarge
from evalplan.main import create_app
from support.helpers import NoJobsDispatcher, assert_problem, count_rows, create_benchmark, settings_for

MB = 1024 * 1024


@pytest.fixture
def capped_client(db_session_factory: sessionmaker[Session], database_urls: dict[str, str],
                  backend: str) -> Iterator[TestClient]:
    app = create_app(settings_for(database_urls[backend], max_decompressed_bytes=32 * MB,
                                  inline_import_max_bytes=50 * MB),
                     session_factory=db_session_factory, dispatcher=NoJobsDispatcher())
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def peak_of(call: Callable[[], object]) -> tuple[object, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_csv_header_of_a_million_items_is_413_without_storing(
        capped_client: TestClient, db_session_factory: sessionmaker[Session]) -> None:
    create_benchmark(capped_client, "wide", score_kind="binary")
    n = 1_000_000
    header = "model," + ",".join(f"q{j}" for j in range(n))
    body = (header + "\nm1," + ",".join("1" for _ in range(n)) + "\nm2," + ",".join("0" for _ in range(n))
            + "\n").encode()
    before = count_rows(db_session_factory, Item, Model, Score)
    response, peak = peak_of(lambda: capped_client.post("/v1/benchmarks/wide/scores", content=body,
                                                        headers={"content-type": "text/csv"}))
    problem = assert_problem(response, 413)  # before: 200 and 1,000,000 items stored (peak 1.76 GB)
    assert "EVALPLAN_MAX_ITEMS_PER_UPLOAD" in problem["detail"]
    assert count_rows(db_session_factory, Item, Model, Score) == before
    assert peak < max(2 * len(body), 300 * MB), peak


def test_an_eval_zip_that_decompresses_past_the_cap_is_413(capped_client: TestClient,
                                                           db_session_factory: sessionmaker[Session]) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("header.json", "w") as member:
            chunk = b" " * MB
            for _ in range(96):  # 96 MB of spaces: ~100 KB compressed
                member.write(chunk)
    data = buffer.getvalue()
    assert len(data) < 2 * MB
    before = count_rows(db_session_factory, Benchmark, Item, Score)
    response, peak = peak_of(lambda: capped_client.post(
        "/v1/imports/inspect", files=[("files", ("bomb.eval", data, "application/zip"))]))
    problem = assert_problem(response, 413)  # before: the reader inflated all of it, then 422
    assert problem["errors"][0]["member"] == "header.json"
    assert count_rows(db_session_factory, Benchmark, Item, Score) == before
    assert peak < 40 * MB, peak


def _zip(members: dict[str, bytes], prefix: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return prefix + buffer.getvalue()


def _spaces_bomb(mb: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("header.json", "w") as member:
        for _ in range(mb):
            member.write(b" " * MB)
    return buffer.getvalue()


#: 2,100,000 empty objects: 6.3 MB of JSON, past the 2,000,000 values an upload may hold
MANY_VALUES = b"[" + b"{}," * 2_099_999 + b"{}]"
#: the same shape past a limit lowered to 100,000 (the API cases run faster)
SOME_VALUES = b"[" + b"{}," * 109_999 + b"{}]"


def test_a_zip_bomb_behind_prefix_bytes_is_still_413(capped_client: TestClient,
                                                     db_session_factory: sessionmaker[Session]) -> None:
    """Issue 32 item 2: ``(printf '\\0\\0junk'; cat bomb.zip) > p.eval``: the check skipped files not starting
    with ``PK`` while the reader still opened them (the API went from 528 MB to 2,576 MB)."""
    data = b"\0\0junk" + _spaces_bomb(96)
    assert zipfile.is_zipfile(io.BytesIO(data))  # what every zip reader sees
    before = count_rows(db_session_factory, Benchmark, Item, Score)
    for name in ("p.eval", "p.json"):
        response, peak = peak_of(lambda n=name: capped_client.post(
            "/v1/imports/inspect", files=[("files", (n, data, "application/octet-stream"))]))
        problem = assert_problem(response, 413)  # before: 422 after the reader inflated all 96 MB
        assert problem["errors"][0]["member"] == "header.json"
        assert peak < 40 * MB, peak
    assert count_rows(db_session_factory, Benchmark, Item, Score) == before


def test_a_json_member_of_millions_of_values_is_413_while_it_streams() -> None:
    """A 98 KB ``.eval`` whose ``header.json`` is 100 MB of ``{},`` took a worker to 2.9 GB: its values are
    counted as the member streams past (ijson), never built."""
    from evalplan.kit.upload_bounds import check_upload

    bomb = _zip({"header.json": MANY_VALUES}, prefix=b"\0\0junk")
    assert len(bomb) < 100_000
    with pytest.raises(PayloadTooLarge, match="2000000 JSON values") as refused:
        check_upload([("m.eval", bomb)], 128 * MB)  # before: passed (only the bytes were counted)
    assert refused.value.errors[0]["member"] == "header.json"
    for head in (b"[NaN,", b"{},"):  # a token ijson refuses does not end the count
        with pytest.raises(PayloadTooLarge, match="2000000 JSON values"):
            check_upload([("n.eval", _zip({"header.json": head + MANY_VALUES[1:]}))], 128 * MB)


def test_json_of_too_many_values_is_413_on_every_import_path(capped_client: TestClient,
                                                             db_session_factory: sessionmaker[Session],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The same bound on the inspect (zip and JSON), HELM, lighteval and lm-eval paths (limit lowered)."""
    from evalplan.kit import upload_bounds

    monkeypatch.setattr(upload_bounds, "MAX_JSON_VALUES", 100_000)
    before = count_rows(db_session_factory, Benchmark, Item, Score)
    cases = [
        ("/v1/imports/inspect", [("files", ("m.eval", _zip({"header.json": SOME_VALUES}), "application/zip"))], {}),
        ("/v1/imports/inspect", [("files", ("m.json", SOME_VALUES, "application/json"))], {}),
        ("/v1/imports/helm", [("files", ("per_instance_stats.json", SOME_VALUES, "application/json"))], {}),
        ("/v1/imports/lighteval", [("files", ("results_2024-01-01T00-00-00.json", SOME_VALUES, "application/json"))],
         {}),
        ("/v1/imports/lm-eval", [("files", ("samples_t_2024-01-01T00-00-00.jsonl", SOME_VALUES + b"\n",
                                            "application/jsonl"))], {"model": "m"}),
    ]
    for path, files, data in cases:
        problem = assert_problem(capped_client.post(path, files=files, data=data), 413)
        assert "100000 JSON values" in problem["detail"], (path, problem)
    assert count_rows(db_session_factory, Benchmark, Item, Score) == before


def test_a_parquet_of_millions_of_values_is_413(capped_client: TestClient) -> None:
    """lighteval details: the parquet footer's leaf values count against the same bound."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.table({"doc": pa.array([0] * 2_100_000, pa.int8()), "metric": pa.array([1] * 2_100_000,
                                                                                            pa.int8())}), sink)
    assert len(sink.getvalue()) < MB
    response = capped_client.post("/v1/imports/lighteval", files=[
        ("files", ("details_t_2024-01-01T00-00-00.parquet", sink.getvalue(), "application/octet-stream"))])
    problem = assert_problem(response, 413)
    assert "JSON values" in problem["detail"] or "values" in problem["detail"], problem


def test_real_logs_pass_the_bounds() -> None:
    from pathlib import Path

    from evalplan.kit.upload_bounds import UploadBudget, check_archive

    log = next((Path(__file__).resolve().parents[2] / "examples" / "inspect").glob("*.eval"))
    budget = UploadBudget(32 * MB)
    check_archive(log.name, log.read_bytes(), budget)
    assert 0 < budget.values_used < 100_000 and 0 < budget.bytes_used < 32 * MB


def test_a_long_score_json_naming_a_million_items_is_refused_early(
        capped_client: TestClient, db_session_factory: sessionmaker[Session]) -> None:
    """Issue 32 item 3: 40 MB of ``[{model, item, score}]`` naming 1,000,000 items was 413 only after 38 s
    (+670 MB): the body was parsed twice (the input guard, then the route) before the items were counted.
    The items are now counted from the raw bytes, stopping at the limit, before any parse."""
    import time

    create_benchmark(capped_client, "long", score_kind="binary")
    n = 1_000_000
    body = ("[" + ",".join(f'{{"model":"m","item":"q{j}","score":1}}' for j in range(n)) + "]").encode()
    before = count_rows(db_session_factory, Item, Model, Score)
    started = time.monotonic()
    response = capped_client.post("/v1/benchmarks/long/scores", content=body,
                                  headers={"content-type": "application/json"})
    elapsed = time.monotonic() - started
    problem = assert_problem(response, 413)
    assert "at least 200001 items" in problem["detail"] and "EVALPLAN_MAX_ITEMS_PER_UPLOAD" in problem["detail"]
    assert count_rows(db_session_factory, Item, Model, Score) == before
    assert elapsed < 15, elapsed  # before: > 100 s on this 2-core machine (the strict parse walked 4M values)


def test_the_score_and_item_uploads_keep_the_strict_json_rules(capped_client: TestClient) -> None:
    """The input guard leaves these bodies to the route, whose parser applies the same rules, located by row."""
    create_benchmark(capped_client, "strict", score_kind="continuous")
    for body, where in (('[{"model": "m", "item": "q0", "score": NaN}]', "NaN"),
                        ('[{"model": "m\\u0000", "item": "q0", "score": 1}]', "NUL"),
                        ('[{"model": "m\\u001c", "item": "q0", "score": 1}]', "U+001C")):
        problem = assert_problem(capped_client.post("/v1/benchmarks/strict/scores", content=body,
                                                    headers={"content-type": "application/json"}), 422)
        assert where in problem["detail"] and problem["errors"][0]["row"] == 0, problem
    problem = assert_problem(capped_client.post("/v1/benchmarks/strict/items", content='[{"id": "a\\u0007"}]',
                                                headers={"content-type": "application/json"}), 422)
    assert "U+0007" in problem["detail"]
