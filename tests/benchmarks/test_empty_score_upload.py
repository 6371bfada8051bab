"""Issue 34 failure 4: an upload without a single score (a header-only CSV, rows of empty cells, ``[]``) is a
located 422 that changes nothing: no model, no item, no score, the same data_version."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from evalplan.db.models import Benchmark, Item, Model
from support.helpers import assert_problem


def counts(factory) -> tuple[int, int, int]:
    with factory() as session:
        version = session.scalar(select(Benchmark.data_version).where(Benchmark.name == "b"))
        return (session.scalar(select(func.count()).select_from(Item)), session.scalar(select(func.count())
                .select_from(Model)), version)


@pytest.mark.parametrize(("body", "ctype", "row"), [
    (b"model,a,b\n", "text/csv", 2),
    (b"model,a,b", "text/csv", 2),
    (b"model,a,b\nm1,,\n", "text/csv", 2),
    (b"[]", "application/json", 0),
])
def test_an_upload_without_scores_is_422_and_stores_nothing(client, db_session_factory, body, ctype, row) -> None:
    assert client.post("/v1/benchmarks", json={"name": "b", "score_kind": "binary"}).status_code == 201
    r = client.post("/v1/benchmarks/b/scores", content=b"model,x\nm0,1\n", headers={"content-type": "text/csv"})
    assert r.status_code == 200, r.text
    before = counts(db_session_factory)
    problem = assert_problem(client.post("/v1/benchmarks/b/scores", content=body, headers={"content-type": ctype}),
                             422)
    assert "no scores" in problem["detail"]
    assert problem["errors"][0]["row"] == row
    assert counts(db_session_factory) == before
    assert client.get("/v1/benchmarks/b").json()["n_items"] == 1
