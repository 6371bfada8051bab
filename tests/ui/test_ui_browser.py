"""The pages in headless Chromium against the real server: every page renders with no console error,
no request off the machine and no axe-core violation, at 1280 px and phone width; the session plot
has one point per observation and a narrowing band; the live session page updates by itself after
an observation is posted; the coreset page's export buttons download the right files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.browser import LiveServer, Tab
from support.svg_marks import band_widths
from support.ui_data import create_benchmark, create_coreset, observe_next, run_session, wait_for_job

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(module_live_server: LiveServer) -> dict[str, Any]:
    http = module_live_server.http
    data = create_benchmark(http, "quiz", capability="knowledge", n_models=24, n_items=60, seed=1)
    create_benchmark(http, "trivia", capability="reasoning", n_models=24, n_items=40, seed=2)
    text = create_coreset(http, {"method": "facility_location", "benchmarks": ["quiz", "trivia"], "budget": 10,
                                 "name": "starter"})
    scored = create_coreset(http, {"method": "mrmr", "benchmarks": ["quiz"], "budget": 6, "reference_models": "all"})
    stopped = run_session(http, data, 4, n=10, max_items=10)
    r = http.post("/v1/backtests", json={"benchmarks": "quiz", "methods": ["random", "mrmr"],
                                         "budgets": [0.05, 0.1, 0.2], "n_reference": 16, "seeds": 2})
    backtest = wait_for_job(http, r.json()["job"]["id"])
    r = http.post("/v1/plans", json={"benchmarks": "quiz", "half_width": 0.1, "level": 0.9,
                                     "methods": ["random", "mrmr"], "seeds": 1, "cost_per_item": 2.5})
    plan = wait_for_job(http, r.json()["job"]["id"])
    stats = http.get("/v1/benchmarks/quiz/stats")
    if stats.status_code == 202:
        wait_for_job(http, stats.json()["job"]["id"])
    return {"url": module_live_server.url, "http": http, "data": data, "text": text, "scored": scored,
            "stopped": stopped, "backtest": backtest, "plan": plan}


def pages(site: dict[str, Any]) -> dict[str, str]:
    return {"home": "/ui/", "benchmark": "/ui/benchmarks/quiz", "session": f"/ui/sessions/{site['stopped']['id']}",
            "text coreset": f"/ui/coresets/{site['text']['id']}", "score coreset": f"/ui/coresets/{site['scored']['id']}",
            "backtest job": f"/ui/jobs/{site['backtest']['id']}", "plan": f"/ui/plans/{site['plan']['id']}",
            "similarity": "/ui/similarity?benchmarks=quiz&benchmarks=trivia"}


def visit(tab: Tab, url: str) -> None:
    response = tab.page.goto(url)
    assert response is not None and response.status == 200, url
    tab.page.wait_for_load_state("networkidle")


def test_every_page_at_desktop_width(site, tab) -> None:
    for name, path in pages(site).items():
        visit(tab, site["url"] + path)
        assert tab.page.locator("h1").count() == 1, name
        charts = tab.page.locator("figure.chart svg")
        if name != "home":
            assert charts.count() >= 1, name
            assert charts.first.bounding_box()["width"] > 300, name
        tab.check_accessibility()
        tab.screenshot_is_drawn(min_ink=0.05)
        assert tab.problems() == [], name


def test_every_page_at_phone_width(site, phone_tab) -> None:
    for name, path in pages(site).items():
        visit(phone_tab, site["url"] + path)
        assert phone_tab.has_no_horizontal_scroll(), f"{name} scrolls sideways at 390 px"
        bodies = phone_tab.page.locator("figure.chart .chart-body")
        for k in range(bodies.count()):  # issue 34: every chart scales to the column, none is cut off on the right
            body = bodies.nth(k)
            box, svg = body.bounding_box(), body.locator("svg").bounding_box()
            assert box["width"] <= 390 and svg["x"] >= box["x"] - 0.5, name
            assert svg["x"] + svg["width"] <= box["x"] + box["width"] + 0.5, (name, k, svg, box)
            assert body.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), (name, k)
        phone_tab.check_accessibility()


def test_session_plot_has_a_point_per_observation_and_a_narrowing_band(site, tab) -> None:
    visit(tab, site["url"] + f"/ui/sessions/{site['stopped']['id']}")
    chart = tab.page.locator('svg[data-chart="trajectory"]')
    assert chart.locator("g[class*='observation'][class*='_marks'] > path").count() == 10
    band = chart.locator("g[class*='band'][class*='_marks'] > path").first.get_attribute("d")
    widths = band_widths(band)
    assert len(widths) == 10 and widths[-1][1] < widths[0][1]
    assert chart.locator("g[class*='true_score'] > *").count() == 1  # quiz's model-04 is fully scored
    assert tab.page.locator("#observations tbody tr").count() == 10
    assert tab.page.locator("#session-live").get_attribute("data-live-src") is None  # stopped: not live


def test_live_session_page_updates_after_an_observation(site, tab) -> None:
    http, data = site["http"], site["data"]
    session = run_session(http, data, 7, n=3)
    visit(tab, site["url"] + f"/ui/sessions/{session['id']}")
    page = tab.page
    page.evaluate("window.__loaded_once = true")  # survives only if the page never reloads
    points = "svg[data-chart='trajectory'] g[class*='observation'][class*='_marks'] > path"
    assert page.locator(points).count() == 3
    observe_next(http, data, session, 7)
    page.wait_for_selector("#session-live[data-n-observed='4']", timeout=15_000)
    assert page.locator(points).count() == 4
    assert page.locator("#observations tbody tr").count() == 4
    assert page.evaluate("window.__loaded_once") is True
    assert "Live: updated" in page.locator("[data-live-status]").inner_text()


@pytest.mark.parametrize("fmt,suffix", [("lm-eval", ".lm-eval.json"), ("inspect", ".inspect.json"), ("csv", ".csv")])
def test_coreset_export_buttons_download_the_export(site, tab, fmt, suffix) -> None:
    coreset = site["text"]
    visit(tab, site["url"] + f"/ui/coresets/{coreset['id']}")
    with tab.page.expect_download() as caught:
        tab.page.locator(f"a[data-export='{fmt}']").click()
    download = caught.value
    assert download.failure() is None, download.failure()
    assert download.suggested_filename == f"starter-v1{suffix}"
    body = Path(download.path()).read_text()
    expected = site["http"].get(f"/v1/coresets/{coreset['id']}/export", params={"format": fmt}).text
    assert body == expected
    if fmt == "lm-eval":
        indices = json.loads(body)
        assert sum(len(v) for v in indices.values()) == 10 and set(indices) <= {"quiz", "trivia"}


def test_job_page_progress_goes_live_then_shows_the_result(site, tab) -> None:
    r = site["http"].post("/v1/backtests", json={"benchmarks": "quiz", "methods": ["random"], "budgets": [0.1],
                                                 "n_reference": 16, "seeds": 3})
    visit(tab, site["url"] + f"/ui/jobs/{r.json()['job']['id']}")
    tab.page.wait_for_selector("text=Backtest table", timeout=60_000)  # reloaded by itself once finished
    assert tab.page.locator("#job-live progress").get_attribute("value") in ("1", "1.0")


def test_plan_page_shows_the_budget_curves_the_chosen_point_and_the_savings(site, tab) -> None:
    plan = site["plan"]["result"]["benchmarks"]["quiz"]
    visit(tab, site["url"] + f"/ui/plans/{site['plan']['id']}")
    assert tab.page.locator("h1").inner_text().startswith("Budget plan")
    svg = tab.page.locator("figure.chart svg")
    assert svg.locator(".curve_marks").count() >= 1 and svg.locator(".chosen_marks path").count() == 1
    text = tab.page.locator("#plan-savings").inner_text()
    saved = 60 - int(plan["budget"])
    assert f"{plan['budget']} of 60 items" in text and f"saves {saved}" in text
    assert f"saves {saved * 2.5:.2f}" in text  # compute, from the request's cost_per_item
    assert tab.page.locator("#plan-table tbody tr").count() == 1
    cells = tab.page.locator("#plan-table tbody tr td").all_inner_texts()
    assert cells[:4] == ["quiz", cells[1], str(plan["budget"]), "60"], cells  # items, of: numbers, not a repr
    assert tab.page.evaluate("() => { const w = document.querySelector('.table-wrap');"
                             " return w.scrollWidth <= w.clientWidth; }"), "the plan table is clipped at 1280 px"
    # the default session and random on held-out references (issue 33 item 5): one row per regime
    session = plan["session"]
    rows = tab.page.locator("#session-table tbody tr")
    assert rows.count() == 2
    first = rows.nth(0).locator("td").all_inner_texts()
    random_models = session["regimes"]["random_models"]
    assert first[:3] == ["quiz", "random", str(random_models["targets"])], first
    assert first[3] == f"{random_models['items']:.0f}" and first[4] == f"{random_models['items_upper']:.0f}", first
    assert first[5] == "60" and first[7] == f"{random_models['vs_random']:.2f}x", first
    assert tab.page.evaluate("() => { const w = document.querySelectorAll('.table-wrap')[1];"
                             " return w.scrollWidth <= w.clientWidth; }"), "the session table is clipped at 1280 px"
    tab.check_accessibility()
    assert tab.problems() == []
