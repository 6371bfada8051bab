"""Item uploads (JSONL or JSON list): counts, upsert by content, listing, located errors, all-or-nothing."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from evalplan.db.models import Benchmark, Item, Model, Score
from support.helpers import assert_problem

NDJSON = {"content-type": "application/x-ndjson"}

ITEMS = [
    {"id": "q1", "prompt": "What is 2+2?", "target": "4", "fields": {"subject": "math"}},
    {"id": "q2", "prompt": "Capital of France?", "target": "Paris"},
    {"id": "q3", "prompt": "Say hi"},
]


def jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()




def row_counts(factory) -> dict[str, int]:
    with factory() as session:
        return {table.__tablename__: session.scalar(select(func.count()).select_from(table))
                for table in (Benchmark, Item, Model, Score)}


def all_items(client, bench: str = "b") -> list[dict]:
    r = client.get(f"/v1/benchmarks/{bench}/items", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return r.json()["items"]


@pytest.fixture
def bench(client) -> str:
    assert client.post("/v1/benchmarks", json={"name": "b"}).status_code == 201
    return "b"


def test_jsonl_upload_creates_items(client, bench) -> None:
    r = client.post("/v1/benchmarks/b/items", content=jsonl(ITEMS), headers=NDJSON)
    assert r.status_code == 200, r.text
    assert r.json() == {"created": 3, "updated": 0, "unchanged": 0}
    items = all_items(client)
    assert [i["id"] for i in items] == ["q1", "q2", "q3"]
    assert items[0]["prompt"] == "What is 2+2?" and items[0]["target"] == "4"
    assert items[0]["fields"] == {"subject": "math"}
    assert items[2]["target"] is None and items[2]["fields"] is None
    assert all(len(i["content_hash"]) == 64 for i in items)
    assert client.get("/v1/benchmarks/b").json()["n_items"] == 3


def test_json_list_upload(client, bench) -> None:
    r = client.post("/v1/benchmarks/b/items", json=ITEMS)
    assert r.status_code == 200, r.text
    assert r.json() == {"created": 3, "updated": 0, "unchanged": 0}
    assert [i["prompt"] for i in all_items(client)] == [i["prompt"] for i in ITEMS]


def test_reupload_counts_created_updated_unchanged(client, bench) -> None:
    client.post("/v1/benchmarks/b/items", content=jsonl(ITEMS), headers=NDJSON)
    changed = [dict(ITEMS[0], prompt="What is 3+3?"), ITEMS[1], ITEMS[2], {"id": "q4", "prompt": "new"}]
    r = client.post("/v1/benchmarks/b/items", content=jsonl(changed), headers=NDJSON)
    assert r.json() == {"created": 1, "updated": 1, "unchanged": 2}
    items = {i["id"]: i for i in all_items(client)}
    assert items["q1"]["prompt"] == "What is 3+3?"
    assert items["q4"]["prompt"] == "new"
    assert len(items) == 4
    # the same body again changes nothing
    r = client.post("/v1/benchmarks/b/items", content=jsonl(changed), headers=NDJSON)
    assert r.json() == {"created": 0, "updated": 0, "unchanged": 4}


def test_changed_fields_or_target_is_an_update(client, bench) -> None:
    client.post("/v1/benchmarks/b/items", json=ITEMS)
    r = client.post("/v1/benchmarks/b/items", json=[dict(ITEMS[0], fields={"subject": "algebra"}),
                                                     dict(ITEMS[1], target="paris")])
    assert r.json() == {"created": 0, "updated": 2, "unchanged": 0}
    items = {i["id"]: i for i in all_items(client)}
    assert items["q1"]["fields"] == {"subject": "algebra"} and items["q2"]["target"] == "paris"


def test_item_listing_pagination(client, bench) -> None:
    records = [{"id": f"i{k}", "prompt": f"p{k}", "target": str(k), "fields": {"k": k}} for k in range(7)]
    client.post("/v1/benchmarks/b/items", content=jsonl(records), headers=NDJSON)
    seen, cursor, sizes = [], None, []
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        body = client.get("/v1/benchmarks/b/items", params=params).json()
        sizes.append(len(body["items"]))
        seen.extend(body["items"])
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sizes == [3, 3, 1]
    assert [(i["id"], i["prompt"], i["target"], i["fields"]) for i in seen] == [
        (f"i{k}", f"p{k}", str(k), {"k": k}) for k in range(7)]


def test_item_listing_bad_cursor_and_limit(client, bench) -> None:
    assert_problem(client.get("/v1/benchmarks/b/items", params={"cursor": "@@"}), 422)
    import base64
    huge = base64.urlsafe_b64encode(json.dumps(10**30).encode()).decode().rstrip("=")
    assert_problem(client.get("/v1/benchmarks/b/items", params={"cursor": huge}), 422)
    text_cursor = base64.urlsafe_b64encode(b'"x"').decode().rstrip("=")
    assert_problem(client.get("/v1/benchmarks/b/items", params={"cursor": text_cursor}), 422)
    assert_problem(client.get("/v1/benchmarks/b/items", params={"limit": 5000}), 422)


def test_numeric_target_and_id_become_strings(client, bench) -> None:
    r = client.post("/v1/benchmarks/b/items", content=b'{"id": 7, "prompt": "p", "target": 42}\n', headers=NDJSON)
    assert r.json() == {"created": 1, "updated": 0, "unchanged": 0}
    assert all_items(client)[0]["id"] == "7" and all_items(client)[0]["target"] == "42"


def test_blank_lines_and_crlf_are_fine(client, bench) -> None:
    body = b'{"id": "a", "prompt": "x"}\r\n\r\n{"id": "b", "prompt": "y"}\r\n'
    assert client.post("/v1/benchmarks/b/items", content=body, headers=NDJSON).json()["created"] == 2


def test_unknown_benchmark_is_404(client) -> None:
    assert_problem(client.post("/v1/benchmarks/none/items", content=jsonl(ITEMS), headers=NDJSON), 404)
    assert_problem(client.get("/v1/benchmarks/none/items"), 404)


# ---------------------------------------------------------------- bad uploads: located, nothing stored


@pytest.fixture
def seeded(client, bench, db_session_factory):
    """A benchmark with items and scores, and a snapshot to compare after a bad upload."""
    client.post("/v1/benchmarks/b/items", content=jsonl(ITEMS), headers=NDJSON)
    client.post("/v1/benchmarks/b/scores", content=b"model,q1,q2\nm1,1,0\n", headers={"content-type": "text/csv"})

    def snapshot() -> tuple:
        return (row_counts(db_session_factory), all_items(client), client.get("/v1/benchmarks/b").json())

    before = snapshot()
    assert before[0] == {"benchmarks": 1, "items": 3, "models": 1, "scores": 2}
    yield
    assert snapshot() == before, "a rejected upload changed the database"


def bad_lines(*lines: str) -> bytes:
    # a changed existing item and a new item first: they must not be stored either
    good = [json.dumps(dict(ITEMS[0], prompt="CHANGED")), json.dumps({"id": "fresh", "prompt": "new"})]
    return ("\n".join(good + list(lines)) + "\n").encode()


def test_malformed_jsonl_line_names_line(client, seeded) -> None:
    body = assert_problem(client.post("/v1/benchmarks/b/items", headers=NDJSON,
                                      content=bad_lines('{"id": "x", "prompt": ')), 422)
    assert body["errors"][0]["row"] == 3
    assert "row 3" in body["detail"]


def test_malformed_line_number_counts_blank_lines(client, seeded) -> None:
    body = assert_problem(client.post("/v1/benchmarks/b/items", headers=NDJSON,
                                      content=bad_lines("", "", "not json")), 422)
    assert body["errors"][0]["row"] == 5


def test_missing_prompt_names_row_and_column(client, seeded) -> None:
    body = assert_problem(client.post("/v1/benchmarks/b/items", headers=NDJSON,
                                      content=bad_lines('{"id": "x", "target": "t"}')), 422)
    assert (body["errors"][0]["row"], body["errors"][0]["column"]) == (3, "prompt")


def test_missing_prompt_in_json_list(client, seeded) -> None:
    body = assert_problem(client.post("/v1/benchmarks/b/items", json=[
        {"id": "new", "prompt": "ok"}, {"id": "x", "prompt": None}]), 422)
    assert (body["errors"][0]["row"], body["errors"][0]["column"]) == (1, "prompt")


def test_duplicate_id_in_one_upload(client, seeded) -> None:
    body = assert_problem(client.post("/v1/benchmarks/b/items", headers=NDJSON,
                                      content=bad_lines('{"id": "fresh", "prompt": "again"}')), 422)
    assert (body["errors"][0]["row"], body["errors"][0]["column"]) == (3, "id")
    assert "first at row 2" in body["errors"][0]["detail"]


@pytest.mark.parametrize("line, column", [
    ('{"prompt": "no id"}', "id"),
    ('{"id": "", "prompt": "x"}', "id"),
    ('{"id": "' + "x" * 201 + '", "prompt": "x"}', "id"),
    ('{"id": "x", "prompt": "p", "fields": [1]}', "fields"),
    ('{"id": "x", "prompt": "p", "target": true}', "target"),
    ('{"id": "x", "prompt": "p", "answer": "a"}', "answer"),
    ('{"id": "x", "prompt": 3}', "prompt"),
    ('{"id": "x", "prompt": "nul \\u0000 inside"}', "prompt"),
    ('{"id": "x", "prompt": "p", "target": "nul \\u0000"}', "target"),
    ('{"id": "x\\u0000", "prompt": "p"}', "id"),
    ('{"id": "x", "prompt": "p", "fields": {"a": {"b": "\\u0000"}}}', "fields.a.b"),
    ('{"id": "x", "prompt": "p", "fields": {"a": [1, NaN]}}', "fields.a[1]"),
    ('{"id": "x", "prompt": "p", "fields": {"a": 1e999}}', "fields.a"),
])
def test_bad_field_names_row_and_column(client, seeded, line: str, column: str) -> None:
    body = assert_problem(client.post("/v1/benchmarks/b/items", headers=NDJSON, content=bad_lines(line)), 422)
    assert (body["errors"][0]["row"], body["errors"][0]["column"]) == (3, column)


def test_not_an_object_line(client, seeded) -> None:
    body = assert_problem(client.post("/v1/benchmarks/b/items", headers=NDJSON, content=bad_lines("[1, 2]")), 422)
    assert body["errors"][0]["row"] == 3


@pytest.mark.parametrize("content", [b"", b"\n\n", b"[]"])
def test_empty_upload_is_422(client, seeded, content: bytes) -> None:
    ctype = "application/json" if content == b"[]" else "application/x-ndjson"
    assert_problem(client.post("/v1/benchmarks/b/items", headers={"content-type": ctype}, content=content), 422)


def test_json_list_malformed_and_not_a_list(client, seeded) -> None:
    assert_problem(client.post("/v1/benchmarks/b/items", headers={"content-type": "application/json"},
                               content=b'[{"id": "a"'), 422)
    assert_problem(client.post("/v1/benchmarks/b/items", json={"id": "a", "prompt": "p"}), 422)


@pytest.mark.parametrize("ctype", ["text/csv", "application/xml", "multipart/form-data; boundary=x"])
def test_wrong_content_type_is_415(client, seeded, ctype: str) -> None:
    body = assert_problem(client.post("/v1/benchmarks/b/items", headers={"content-type": ctype},
                                      content=jsonl(ITEMS)), 415)
    assert ctype.split(";")[0] in body["detail"]


def test_missing_content_type_is_415(client, seeded) -> None:
    r = client.post("/v1/benchmarks/b/items", content=jsonl(ITEMS), headers={"content-type": ""})
    assert_problem(r, 415)


def test_score_only_items_get_text_on_item_upload(client, bench) -> None:
    client.post("/v1/benchmarks/b/scores", content=b"model,q1,q2\nm1,1,0\n", headers={"content-type": "text/csv"})
    assert [i["prompt"] for i in all_items(client)] == [None, None]
    r = client.post("/v1/benchmarks/b/items", content=jsonl(ITEMS), headers=NDJSON)
    assert r.json() == {"created": 1, "updated": 2, "unchanged": 0}
    assert [i["id"] for i in all_items(client)] == ["q1", "q2", "q3"]
    assert client.get("/v1/benchmarks/b").json()["n_items"] == 3
    assert client.get("/v1/benchmarks/b/scores").text == "model,q1,q2,q3\nm1,1,0,\n"


def test_fields_keep_unicode_and_nesting(client, bench) -> None:
    record = {"id": "u", "prompt": "héllo ✓", "fields": {"choices": ["a", "b"], "meta": {"n": 1.5, "ok": True},
                                                       "weird": "tab\tand \u2028 separator"}}
    assert client.post("/v1/benchmarks/b/items", content=jsonl([record]), headers=NDJSON).json()["created"] == 1
    item = all_items(client)[0]
    assert item["prompt"] == "héllo ✓"
    assert item["fields"] == record["fields"]
