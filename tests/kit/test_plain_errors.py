"""Validation errors in plain words (issue 34, "Clarity"): malformed JSON says where (line, column) and the
Content-Type; a non-JSON body says the Content-Type; a union field gives one error without pydantic's branch
tags (``constrained-int``)."""

from __future__ import annotations

from support.helpers import assert_problem


def test_malformed_json_says_line_and_column(client) -> None:
    r = client.post("/v1/sessions", content=b'{"benchmark": "x",\n "target": }',
                    headers={"content-type": "application/json"})
    body = assert_problem(r, 422)
    assert "JSON decode error" not in body["detail"] and "body.30" not in body["detail"]
    assert "malformed JSON at line 2, column 12" in body["detail"]
    assert "application/json" in body["detail"]
    error = body["errors"][0]
    assert (error["type"], error["line"], error["column"], error["field"]) == ("json_invalid", 2, 12, None)


def test_csv_sent_as_json_names_the_content_type(client) -> None:
    csv = b"model,item,score\nm1,q1,1\n"
    labelled_json = assert_problem(client.post("/v1/sessions", content=csv,
                                               headers={"content-type": "application/json"}), 422)
    assert "malformed JSON at line 1, column 1" in labelled_json["detail"]
    assert "Content-Type: application/json" in labelled_json["detail"]
    assert "does not look like JSON" in labelled_json["detail"] and "text/csv" in labelled_json["detail"]
    as_csv = assert_problem(client.post("/v1/sessions", content=csv, headers={"content-type": "text/csv"}), 422)
    assert as_csv["detail"] == ("request body: this route takes a JSON body (Content-Type: application/json); "
                                "the request's Content-Type is text/csv")
    assert len(as_csv["errors"]) == 1


def test_a_union_field_gives_one_plain_error(client) -> None:
    too_many = assert_problem(client.post("/v1/sessions", json={"benchmark": "x", "target": "t",
                                                                "max_items": 10_000_000}), 422)
    assert len(too_many["errors"]) == 1, too_many["errors"]
    assert "constrained-int" not in str(too_many) and "MaxItemsFraction" not in str(too_many)
    assert too_many["errors"][0]["field"] == "max_items"
    assert too_many["detail"] == "max_items: must be less than or equal to 1000000, got 10000000"
    wrong_kind = assert_problem(client.post("/v1/sessions", json={"benchmark": "x", "target": "t",
                                                                  "max_items": "lots"}), 422)
    assert [e["field"] for e in wrong_kind["errors"]] == ["max_items"]
    assert wrong_kind["detail"] == "max_items: must be an integer or an object"
    inner = assert_problem(client.post("/v1/sessions", json={"benchmark": "x", "target": "t",
                                                             "max_items": {"fraction": "half"}}), 422)
    assert [e["field"] for e in inner["errors"]] == ["max_items.fraction"]
    assert inner["detail"] == "max_items.fraction: must be a number"


def test_other_errors_keep_their_place(client) -> None:
    body = assert_problem(client.post("/v1/sessions", json={"benchmark": "x", "target": "t", "bogus": 1}), 422)
    assert body["detail"] == "bogus: is not a known field"
    query = assert_problem(client.get("/v1/benchmarks?limit=abc"), 422)
    assert query["detail"].startswith("query parameter limit: must be a valid integer")
    assert_problem(client.post("/v1/sessions"), 422)
