"""``GET /v1/leaderboard``: measured scores, session and coreset estimates marked as such, sorting,
paging, CSV (formula cells neutralised), bad input, and team scoping under ``EVALPLAN_AUTH=required``."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from fastapi.testclient import TestClient

from support.helpers import (
    assert_problem,
    upload_matrix,
    upload_score_cells,
    wait_for_job,
)
from support.teams import (
    Teams,
    no_jobs_teams,  # noqa: F401 (the teams fixture)
)


def matrix(seed: int, n_models: int = 8, n_items: int = 30) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ability = np.linspace(-1.5, 1.5, n_models)[:, None]
    difficulty = rng.normal(0, 1, n_items)[None, :]
    return (rng.random((n_models, n_items)) < 1 / (1 + np.exp(difficulty - ability))).astype(float)


NAMES = [f"m{i}" for i in range(8)]
ITEMS = [f"q{j:02d}" for j in range(30)]


def test_measured_and_session_cells_sorted_paged_and_csv(client: TestClient) -> None:
    a, b = matrix(0), matrix(1)
    upload_matrix(client, "alpha", a, NAMES, ITEMS)
    upload_matrix(client, "beta", b, NAMES, ITEMS)
    # a model with a few scores only, evaluated by a session on alpha
    upload_score_cells(client, "alpha", [{"model": "=cmd()", "item": ITEMS[j], "score": 1.0} for j in range(3)])
    r = client.post("/v1/sessions", json={"benchmark": "alpha", "target": "=cmd()", "reference_models": NAMES})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    nxt = r.json()["next_items"]
    r = client.post(f"/v1/sessions/{sid}/observations", json={"item": nxt[0], "score": 1})
    assert r.status_code == 200, r.text
    session_body = r.json()

    r = client.get("/v1/leaderboard", params={"benchmarks": "alpha,beta"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [b["name"] for b in body["benchmarks"]] == ["alpha", "beta"]
    assert body["level"] == 0.95 and body["sort"] == "mean" and body["n_models"] == 9
    rows = {row["model"]: row for row in body["items"]}
    for i, name in enumerate(NAMES):
        cell = rows[name]["cells"]["alpha"]
        assert cell["kind"] == "measured" and cell["ci"] is None
        assert cell["score"] == pytest.approx(a[i].mean())
        assert rows[name]["mean"] == pytest.approx((a[i].mean() + b[i].mean()) / 2)
    marked = rows["=cmd()"]
    assert marked["cells"]["alpha"]["kind"] == "session"
    assert marked["cells"]["alpha"]["score"] == pytest.approx(session_body["estimate"])
    assert marked["cells"]["alpha"]["ci"] == pytest.approx(session_body["ci"])
    assert marked["cells"]["alpha"]["level"] == 0.95 and marked["cells"]["alpha"]["source"] == sid
    assert marked["cells"]["beta"] is None and marked["mean"] is None
    means = [row["mean"] for row in body["items"] if row["mean"] is not None]
    assert means == sorted(means, reverse=True)
    assert body["items"][-1]["model"] == "=cmd()"  # no mean: last

    # sort by one benchmark, ascending; pages of 3 add up to the whole table
    seen: list[str] = []
    cursor = None
    while True:
        params = {"benchmarks": "alpha,beta", "sort": "beta", "order": "asc", "limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/v1/leaderboard", params=params).json()
        seen += [row["model"] for row in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    order = sorted(range(8), key=lambda i: (b[i].mean(), NAMES[i]))
    assert seen == [NAMES[i] for i in order] + ["=cmd()"]

    r = client.get("/v1/leaderboard", params={"benchmarks": "alpha,beta"}, headers={"Accept": "text/csv"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    table = list(csv.reader(io.StringIO(r.text)))
    assert table[0][:3] == ["model", "mean", "alpha"] and "alpha kind" in table[0]
    assert len(table) == 10
    assert ["'=cmd()"] == [row[0] for row in table if "cmd" in row[0]]  # formula neutralised
    assert r.text == client.get("/v1/leaderboard", params={"benchmarks": "alpha,beta", "format": "csv"}).text


@pytest.mark.parametrize("params, where", [
    ({"benchmarks": ""}, "benchmarks"),
    ({"benchmarks": "alpha,alpha"}, "benchmarks"),
    ({"benchmarks": "alpha", "sort": "nope"}, "sort"),
    ({"benchmarks": "alpha", "order": "up"}, "order"),
    ({"benchmarks": "alpha", "level": 1.5}, "level"),
    ({"benchmarks": "alpha", "cursor": "bad!"}, "cursor"),
])
def test_bad_input_is_422(client: TestClient, params: dict[str, object], where: str) -> None:
    upload_matrix(client, "alpha", matrix(0), NAMES, ITEMS)
    body = assert_problem(client.get("/v1/leaderboard", params=params), 422)
    assert where in str(body)


def test_unknown_benchmark_is_404(client: TestClient) -> None:
    assert_problem(client.get("/v1/leaderboard", params={"benchmarks": "nope"}), 404)


def test_coreset_prediction_cell(committed_client: TestClient) -> None:
    client = committed_client
    a = matrix(2, n_models=12, n_items=40)
    items = [f"q{j:02d}" for j in range(40)]
    upload_matrix(client, "gamma", a, [f"m{i}" for i in range(12)], items)
    r = client.post("/v1/coresets", json={"method": "anchor_points", "benchmarks": ["gamma"], "budget": 8,
                                          "reference_models": "all"})
    assert r.status_code == 202, r.text
    assert wait_for_job(client, r.json()["job"]["id"], timeout=120)["status"] == "succeeded"
    cid = r.json()["coreset"]["id"]
    picked = [it["item"] for it in client.get(f"/v1/coresets/{cid}").json()["items"]]
    upload_score_cells(client, "gamma", [{"model": "newcomer", "item": i, "score": 1.0} for i in picked])
    body = client.get("/v1/leaderboard", params={"benchmarks": "gamma", "level": 0.9}).json()
    cell = {row["model"]: row for row in body["items"]}["newcomer"]["cells"]["gamma"]
    expected = client.post(f"/v1/coresets/{cid}/predict", json={"model": "newcomer", "level": 0.9}).json()
    assert cell["kind"] == "coreset" and cell["source"] == cid and cell["level"] == 0.9
    assert cell["score"] == pytest.approx(expected["benchmarks"]["gamma"]["estimate"])
    assert cell["ci"] == pytest.approx(expected["benchmarks"]["gamma"]["interval"])


def test_second_team_sees_public_resources_only(teams: Teams) -> None:
    upload_matrix(teams.a, "shared", matrix(3), NAMES, ITEMS)
    upload_matrix(teams.a, "secret", matrix(4), NAMES, ITEMS)
    assert teams.a.patch("/v1/benchmarks/shared", json={"visibility": "public"}).status_code == 200
    upload_score_cells(teams.a, "shared", [{"model": m, "item": ITEMS[0], "score": 1.0} for m in ("ckpt", "ckpt2")])
    private = teams.a.post("/v1/sessions", json={"benchmark": "shared", "target": "ckpt", "reference_models": NAMES})
    public = teams.a.post("/v1/sessions", json={"benchmark": "shared", "target": "ckpt2", "reference_models": NAMES,
                                                "visibility": "public"})
    assert private.status_code == 201 and public.status_code == 201, (private.text, public.text)

    mine = {row["model"]: row for row in teams.a.get("/v1/leaderboard", params={"benchmarks": "shared"}).json()["items"]}
    assert mine["ckpt"]["cells"]["shared"]["kind"] == "session"
    r = teams.b.get("/v1/leaderboard", params={"benchmarks": "shared"})
    assert r.status_code == 200, r.text
    theirs = {row["model"]: row for row in r.json()["items"]}
    assert set(theirs) == {*NAMES, "ckpt2"}  # the private session of team alpha is not used, the public one is
    assert theirs["ckpt2"]["cells"]["shared"]["kind"] == "session"
    assert theirs["m0"]["cells"]["shared"]["kind"] == "measured"
    assert_problem(teams.b.get("/v1/leaderboard", params={"benchmarks": "shared,secret"}), 404)
    r = teams.b.get("/v1/leaderboard", params={"benchmarks": "alpha/shared"})
    assert r.status_code in (200, 404)


def test_pages_render_the_table(client: TestClient) -> None:
    upload_matrix(client, "alpha", matrix(0), NAMES, ITEMS)
    upload_matrix(client, "beta", matrix(1), NAMES, ITEMS)
    r = client.get("/ui/leaderboard", params={"benchmarks": "alpha,beta", "sort": "alpha", "order": "asc"})
    assert r.status_code == 200, r.text
    assert "table class=\"leaderboard\"" in r.text and "m7" in r.text and "format=csv" in r.text
    assert client.get("/ui/leaderboard", params={"benchmarks": "alpha,nope"}).status_code == 404
    assert client.get("/ui/leaderboard", params={"benchmarks": "alpha", "sort": "x"}).status_code == 422


def test_every_page_links_the_leaderboard_and_its_picker(client: TestClient) -> None:
    # issue 34: a Leaderboard link in the navigation; without benchmarks the page offers them to pick
    upload_matrix(client, "alpha", matrix(0), NAMES, ITEMS)
    upload_matrix(client, "beta", matrix(1), NAMES, ITEMS)
    for path in ("/ui/", "/ui/benchmarks/alpha", "/ui/similarity", "/ui/leaderboard?benchmarks=alpha"):
        page = client.get(path)
        assert page.status_code == 200, (path, page.text[:500])
        assert '<a href="/ui/leaderboard"' in page.text and ">Leaderboard</a>" in page.text, path
    picker = client.get("/ui/leaderboard")
    assert picker.status_code == 200 and 'aria-current="page">Leaderboard' in picker.text
    assert 'name="benchmarks" value="alpha"' in picker.text and 'name="benchmarks" value="beta"' in picker.text
    chosen = client.get("/ui/leaderboard?benchmarks=alpha&benchmarks=beta")  # what the picker's form sends
    assert chosen.status_code == 200 and "Leaderboard: alpha, beta" in chosen.text
