"""The leaderboard and comparison pages in headless Chromium against the real server: the leaderboard
marks estimates (session, coreset) apart from measured scores, sorts by a column, downloads the
API's CSV; sessions picked on the benchmark page open the comparison page with its charts and
verdicts; no console error, no request off the machine, no axe-core violation, at 1280 px and
phone width."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support.browser import LiveServer, Tab
from support.ui_data import create_benchmark, create_coreset

pytestmark = pytest.mark.browser
LONG = "an-organisation-with-a-long-name/model-family-70B-instruct-run-17-step-"  # real checkpoint names are long


def checkpoint_session(http: Any, data: dict[str, Any], target: str, scores: np.ndarray, order: list[int]) -> str:
    r = http.post("/v1/sessions", json={"benchmark": data["name"], "target": target, "method": "rs_mean",
                                        "reference_models": data["models"]})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    for j in order:
        r = http.post(f"/v1/sessions/{sid}/observations", json={"item": data["items"][j], "score": int(scores[j])})
        assert r.status_code == 200, r.text
    return str(sid)


@pytest.fixture(scope="module")
def site(module_live_server: LiveServer) -> dict[str, Any]:
    http = module_live_server.http
    quiz = create_benchmark(http, "quiz", capability="knowledge", n_models=16, n_items=80, seed=1)
    create_benchmark(http, "trivia", capability="reasoning", n_models=16, n_items=40, seed=2)
    rng = np.random.default_rng(5)
    strong, weak = quiz["scores"][-1], quiz["scores"][0]  # two real rows stand for checkpoints A and B
    order = [int(j) for j in rng.permutation(80)[:40]]
    a = checkpoint_session(http, quiz, LONG + "0001000", weak, order)
    b = checkpoint_session(http, quiz, LONG + "0002000", strong, order)
    scored = create_coreset(http, {"method": "mrmr", "benchmarks": ["quiz"], "budget": 8, "reference_models": "all"})
    picked = [it["item"] for it in scored["items"]]
    r = http.post("/v1/benchmarks/quiz/scores", json=[{"model": "ckpt-coreset", "item": i, "score": 1} for i in picked])
    assert r.status_code == 200, r.text
    return {"url": module_live_server.url, "http": http, "a": a, "b": b}


def visit(tab: Tab, url: str) -> None:
    response = tab.page.goto(url)
    assert response is not None and response.status == 200, url
    tab.page.wait_for_load_state("networkidle")


def test_leaderboard_page_marks_estimates_sorts_and_downloads(site, tab) -> None:
    visit(tab, site["url"] + "/ui/leaderboard?benchmarks=quiz,trivia")
    table = tab.page.locator("table.leaderboard")
    assert table.locator("tbody tr").count() == 16 + 3
    assert table.locator("td[data-kind='session'] .kind-session").count() == 2
    assert table.locator("td[data-kind='coreset'] .kind-coreset").count() == 1
    assert table.locator("td[data-kind='measured']").count() == 2 * 16
    tab.check_accessibility()
    tab.screenshot_is_drawn(min_ink=0.05)
    # sort by trivia, then flip to ascending
    tab.page.locator("thead a", has_text="trivia").click()
    tab.page.wait_for_load_state("networkidle")
    assert tab.page.locator("th[aria-sort='descending']").inner_text().strip() == "trivia"
    tab.page.locator("thead a", has_text="trivia").click()
    tab.page.wait_for_load_state("networkidle")
    assert tab.page.locator("th[aria-sort='ascending']").inner_text().strip() == "trivia"
    column = 1 + 2  # '#', model, quiz, trivia
    values = [float(v) for v in tab.page.locator(f"tbody tr td:nth-child({column + 1})").all_inner_texts()
              if v.strip() not in ("-", "")]
    assert values == sorted(values)
    with tab.page.expect_download() as caught:
        tab.page.locator("a", has_text="Download (CSV)").click()
    body = Path(caught.value.path()).read_text()
    expected = site["http"].get("/v1/leaderboard", params={"benchmarks": "quiz,trivia", "sort": "trivia",
                                                          "order": "asc", "format": "csv"}).text
    assert body == expected and body.startswith("model,mean,quiz,")


def test_benchmark_page_picks_sessions_to_compare(site, tab) -> None:
    visit(tab, site["url"] + "/ui/benchmarks/quiz")
    assert tab.page.locator("#leaderboard-title").count() == 1
    assert tab.page.locator("table.leaderboard tbody tr").count() == 15  # the first page; the full one links on
    assert tab.page.locator("a", has_text="Full leaderboard (19 models)").count() == 1
    tab.page.locator(f"#pick-{site['a']}").check()
    tab.page.locator(f"#pick-{site['b']}").check()
    tab.page.locator("button", has_text="Compare selected sessions").click()
    tab.page.wait_for_load_state("networkidle")
    assert "/ui/compare" in tab.page.url
    rows = tab.page.locator("table").first.locator("tbody tr")
    assert rows.nth(0).locator("td").nth(2).inner_text() == LONG + "0001000"  # the oldest is A
    assert tab.page.locator("figure.chart svg").count() == 2
    verdicts = tab.page.locator(".verdict").all_inner_texts()
    expected = site["http"].post("/v1/comparisons", json={"sessions": [site["a"], site["b"]]}).json()["pairs"][0]
    assert len(verdicts) == 3
    assert (verdicts[0] == "B is better") == (expected["paired"]["verdict"] == "b_better")
    tab.check_accessibility()
    tab.screenshot_is_drawn(min_ink=0.05)


def test_pages_at_phone_width(site, phone_tab) -> None:
    for path in ("/ui/leaderboard?benchmarks=quiz,trivia", "/ui/benchmarks/quiz",
                 f"/ui/compare?sessions={site['a']},{site['b']}"):
        visit(phone_tab, site["url"] + path)
        assert phone_tab.has_no_horizontal_scroll(), f"{path} scrolls sideways at 390 px"
        phone_tab.check_accessibility()


def test_bad_choices_are_html_errors(site, tab) -> None:
    for path, status in ((f"/ui/compare?sessions={site['a']}", 422), ("/ui/leaderboard?benchmarks=nope", 404),
                         ("/ui/compare?sessions=ss_nope,ss_none", 404)):
        tab.expect_console_error("Failed to load resource")
        response = tab.page.goto(site["url"] + path)
        assert response is not None and response.status == status, path
        assert tab.page.locator("h1").count() == 1


def test_tables_fit_at_1280_px(site, tab) -> None:
    """No table on the home, benchmark, leaderboard or compare page is clipped (scrolls inside its box) at 1280 px."""
    for path in ("/ui/", "/ui/benchmarks/quiz", "/ui/leaderboard?benchmarks=quiz,trivia",
                 f"/ui/compare?sessions={site['a']},{site['b']}"):
        visit(tab, site["url"] + path)
        clipped = tab.page.evaluate("""() => [...document.querySelectorAll('.table-wrap')]
            .filter(w => w.scrollWidth > w.clientWidth + 1)
            .map(w => `${w.getAttribute('aria-label')}: ${w.scrollWidth} > ${w.clientWidth}`)""")
        assert clipped == [], f"{path}: {clipped}"


def test_session_and_coreset_pages_show_item_samples_and_find_items(site, tab) -> None:
    http = site["http"]
    visit(tab, site["url"] + f"/ui/sessions/{site['a']}")
    first = tab.page.locator("#observations tbody tr").first
    item = first.locator("td code").first.inner_text()
    stored = http.get("/v1/benchmarks/quiz/items", params={"limit": 500}).json()["items"]
    prompt = next(i["prompt"] for i in stored if i["id"] == item)
    first.locator("details.sample summary").click()
    assert prompt in first.locator("details.sample pre").first.inner_text()
    tab.page.fill("#item-search", item)
    tab.page.locator("form.item-search button").click()
    tab.page.wait_for_load_state("networkidle")
    assert tab.page.locator("#observations tbody tr").count() == 1
    assert tab.page.locator("#observations tbody tr td code").first.inner_text() == item
    tab.check_accessibility()
    visit(tab, site["url"] + f"/ui/sessions/{site['a']}?item=not-an-item")
    assert "has not been observed" in tab.page.locator("#observations").inner_text()

    coreset = http.get("/v1/coresets", params={"limit": 5}).json()["items"][0]
    picked = http.get(f"/v1/coresets/{coreset['id']}").json()["items"][0]["item"]
    visit(tab, site["url"] + f"/ui/coresets/{coreset['id']}?item={picked}")
    rows = tab.page.locator("section[aria-labelledby='items-title'] tbody tr")
    assert rows.count() == 1 and rows.first.locator("code").inner_text() == picked
    rows.first.locator("details.sample summary").click()
    assert next(i["prompt"] for i in stored if i["id"] == picked) in rows.first.locator("pre").first.inner_text()
    tab.check_accessibility()
    tab.screenshot_is_drawn(min_ink=0.05)


def test_first_visit_to_a_benchmark_shows_its_statistics(site, tab) -> None:
    """No "being computed 0%" on the first visit: a small matrix's statistics are computed during it."""
    visit(tab, site["url"] + "/ui/benchmarks/trivia")
    stats = tab.page.locator("#benchmark-stats")
    assert "being computed" not in stats.inner_text() and stats.get_attribute("data-live-src") is None
    assert stats.locator("svg[data-chart='difficulty']").count() == 1
    assert site["http"].get("/v1/benchmarks/trivia/stats").status_code == 200  # the API reads the same result
