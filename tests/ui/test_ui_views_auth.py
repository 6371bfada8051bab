"""The leaderboard and comparison pages in headless Chromium under ``EVALPLAN_AUTH=required``, for a second
team on shared resources (issue 26): team alpha makes a benchmark public and shares two checkpoint sessions,
keeps a third private; team beta signs in at ``/ui/login`` with its token and runs its own session on the
shared benchmark. Beta's leaderboard shows alpha's measured models, alpha's two public sessions and beta's
own session, never alpha's private one; beta compares sessions of both teams on the comparison page; the
private session is a 404 page for beta."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import Engine

from support.browser import LiveServer, Tab, serving
from support.teams import ADMIN_TOKEN, bearer
from support.ui_data import create_benchmark

pytestmark = pytest.mark.browser


def session_of(http: httpx.Client, data: dict[str, Any], target: str, row: np.ndarray, order: list[int],
               visibility: str) -> str:
    r = http.post("/v1/sessions", json={"benchmark": data["name"], "target": target, "method": "rs_mean",
                                        "reference_models": data["models"], "visibility": visibility})
    assert r.status_code == 201, r.text
    sid = str(r.json()["id"])
    for j in order:
        r = http.post(f"/v1/sessions/{sid}/observations", json={"item": data["items"][j], "score": int(row[j])})
        assert r.status_code == 200, r.text
    return sid


@pytest.fixture(scope="module")
def site(engines: dict[str, Engine], database_urls: dict[str, str]) -> Iterator[dict[str, Any]]:
    with serving(engines["postgresql"], database_urls["postgresql"], auth="required",
                 admin_token=ADMIN_TOKEN) as server:
        yield seed(server)


def seed(server: LiveServer) -> dict[str, Any]:
    tokens = {}
    with httpx.Client(base_url=server.url, headers=bearer(ADMIN_TOKEN), timeout=60) as admin:
        for team in ("alpha", "beta"):
            assert admin.post("/v1/teams", json={"name": team}).status_code == 201
            r = admin.post(f"/v1/teams/{team}/tokens", json={"name": f"{team}-ci", "scopes": ["write"]})
            assert r.status_code == 201, r.text
            tokens[team] = r.json()["token"]
    alpha = httpx.Client(base_url=server.url, headers=bearer(tokens["alpha"]), timeout=60)
    beta = httpx.Client(base_url=server.url, headers=bearer(tokens["beta"]), timeout=60)
    quiz = create_benchmark(alpha, "quiz", capability="knowledge", n_models=16, n_items=80, seed=1)
    assert alpha.patch("/v1/benchmarks/quiz", json={"visibility": "public"}).status_code == 200
    for name in quiz["models"]:  # the reference models are shared with the benchmark
        assert alpha.patch(f"/v1/models/{name}", json={"visibility": "public"}).status_code == 200
    rng = np.random.default_rng(5)
    order = [int(j) for j in rng.permutation(80)[:40]]
    rows = quiz["scores"]
    shared = [session_of(alpha, quiz, f"alpha-ckpt-{k}", rows[k], order, "public") for k in (0, 15)]
    private = session_of(alpha, quiz, "alpha-secret-ckpt", rows[7], order, "private")
    own = session_of(beta, quiz, "beta-ckpt", rows[10], order, "private")
    return {"url": server.url, "alpha": alpha, "beta": beta, "token": tokens["beta"], "shared": shared,
            "private": private, "own": own}


def sign_in(tab: Tab, url: str, token: str, next_path: str) -> None:
    response = tab.page.goto(f"{url}/ui/login?next={next_path}")
    assert response is not None and response.status == 200
    tab.page.locator("#token").fill(token)
    tab.page.locator("button", has_text="Sign in").click()
    tab.page.wait_for_load_state("networkidle")


def test_second_team_leaderboard_shows_shared_and_own_estimates_only(site, tab) -> None:
    sign_in(tab, site["url"], site["token"], "/ui/leaderboard?benchmarks=quiz")
    assert "/ui/leaderboard" in tab.page.url
    table = tab.page.locator("table.leaderboard")
    names = " ".join(table.locator("tbody tr").all_inner_texts())
    assert table.locator("td[data-kind='measured']").count() == 16
    assert table.locator("td[data-kind='session'] .kind-session").count() == 3  # alpha's two shared, beta's own
    assert "alpha-ckpt-0" in names and "alpha-ckpt-15" in names and "beta-ckpt" in names
    assert "alpha-secret-ckpt" not in names
    tab.check_accessibility()
    tab.screenshot_is_drawn(min_ink=0.05)
    # the page's CSV is the API's table for the same caller
    expected = site["beta"].get("/v1/leaderboard", params={"benchmarks": "quiz", "format": "csv"}).text
    assert "alpha-secret-ckpt" not in expected and "beta-ckpt" in expected
    with tab.page.expect_download() as caught:
        tab.page.locator("a", has_text="Download (CSV)").click()
    with open(caught.value.path(), encoding="utf-8") as fh:
        assert fh.read() == expected


def test_second_team_compares_a_shared_session_with_its_own(site, tab) -> None:
    pair = f"{site['shared'][1]},{site['own']}"
    sign_in(tab, site["url"], site["token"], f"/ui/compare?sessions={pair}")
    assert "/ui/compare" in tab.page.url
    assert tab.page.locator("figure.chart svg").count() == 2
    verdicts = tab.page.locator(".verdict").all_inner_texts()
    expected = site["beta"].post("/v1/comparisons", json={"sessions": pair.split(",")})
    assert expected.status_code == 200, expected.text
    assert len(verdicts) == 3
    assert (verdicts[0] == "B is better") == (expected.json()["pairs"][0]["paired"]["verdict"] == "b_better")
    tab.check_accessibility()
    # alpha's private session does not exist for beta, on the page as in the API
    tab.expect_console_error("404")
    response = tab.page.goto(f"{site['url']}/ui/compare?sessions={site['shared'][0]},{site['private']}")
    assert response is not None and response.status == 404
    assert site["beta"].post("/v1/comparisons", json={"sessions": [site["shared"][0], site["private"]]}
                             ).status_code == 404


def test_signed_out_pages_ask_for_a_token(site, tab) -> None:
    response = tab.page.goto(site["url"] + "/ui/leaderboard?benchmarks=quiz")
    assert response is not None and response.status == 200 and "/ui/login" in tab.page.url
    assert tab.page.locator("#token").count() == 1
