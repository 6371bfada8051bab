"""Every page renders (HTML, the right status) from the same services as the API: home, benchmark,
session, coreset, job (backtest), similarity; unknown ids are HTML 404 pages."""

from __future__ import annotations

import re

import pytest

from support.svg_marks import mark_items
from support.ui_data import create_benchmark, create_coreset, run_session, wait_for_job


def html(client, path: str, status: int = 200) -> str:
    r = client.get(path)
    assert r.status_code == status, (path, r.status_code, r.text[:2000])
    assert r.headers["content-type"].startswith("text/html"), path
    return r.text


@pytest.fixture
def seeded(committed_client) -> dict:
    http = committed_client
    data = create_benchmark(http, "quiz", capability="knowledge", n_models=20, n_items=40, seed=1)
    other = create_benchmark(http, "trivia", capability="reasoning", n_models=20, n_items=30, seed=2)
    text = create_coreset(http, {"method": "facility_location", "benchmarks": ["quiz", "trivia"], "budget": 8,
                                 "name": "starter"})
    scored = create_coreset(http, {"method": "mrmr", "benchmarks": ["quiz"], "budget": 5, "reference_models": "all"})
    session = run_session(http, data, 2, n=6)
    r = http.post("/v1/backtests", json={"benchmarks": "quiz", "methods": ["random", "mrmr"], "budgets": [0.1, 0.2],
                                         "n_reference": 12, "seeds": 2})
    backtest = wait_for_job(http, r.json()["job"]["id"])
    return {"data": data, "other": other, "text": text, "scored": scored, "session": session, "backtest": backtest}


def test_root_redirects_to_the_pages(client) -> None:
    r = client.get("/", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/ui/"
    assert "No benchmarks yet" in html(client, "/ui/")


@pytest.mark.slow
def test_every_page_renders(committed_client, seeded) -> None:
    http = committed_client
    home = html(http, "/ui/")
    for link in ("/ui/benchmarks/quiz", f"/ui/coresets/{seeded['text']['id']}", f"/ui/sessions/{seeded['session']['id']}",
                 f"/ui/jobs/{seeded['backtest']['id']}"):
        assert f'href="{link}"' in home, link

    bench = html(http, "/ui/benchmarks/quiz")
    assert "Coresets of this benchmark" in bench and seeded["scored"]["id"] in bench
    assert seeded["session"]["id"] in bench and "trivia" not in bench.split("Coresets of this benchmark")[0]
    stats_job = re.search(r'href="/ui/jobs/(job_[0-9a-f]+)"', bench)
    if "data-live-src" in bench:  # the statistics job started with the first visit
        assert stats_job is not None
        wait_for_job(http, stats_job.group(1))
    stats = html(http, "/ui/benchmarks/quiz/stats")
    assert "Model means" in stats and "Item difficulty" in stats and "data-live-src" not in stats
    difficulty = re.search(r'<svg role="img"[^>]*data-chart="difficulty".*?</svg>', stats, re.DOTALL)
    assert difficulty is not None and mark_items(difficulty.group(0), "histogram")  # one bar per bin

    session = html(http, f"/ui/sessions/{seeded['session']['id']}")
    assert 'data-chart="trajectory"' in session and 'data-live-src="/ui/sessions/' in session
    assert session.count("<tr><td class=\"num\">") >= 6

    text = html(http, f"/ui/coresets/{seeded['text']['id']}")
    assert "Greedy gain curve" in text and 'data-export="lm-eval"' in text and "starter" in text
    assert "predicted vs true" not in text
    scored = html(http, f"/ui/coresets/{seeded['scored']['id']}")
    assert "Reference models: predicted vs true" in scored and 'data-chart="predictions"' in scored
    assert 'data-chart="composition"' in scored and "Greedy gain curve" not in scored

    job = html(http, f"/ui/jobs/{seeded['backtest']['id']}")
    assert "Backtest table" in job and 'data-chart="job"' in job and "mRMR++" in job

    similarity = html(http, "/ui/similarity")
    assert 'value="quiz"' in similarity and 'value="trivia"' in similarity
    compared = html(http, "/ui/similarity?benchmarks=quiz&benchmarks=trivia")
    assert 'data-chart="similarity"' in compared  # small and embedded already (by the text coreset): inline


def test_an_export_that_cannot_work_is_a_disabled_button_with_the_reason(committed_client) -> None:
    create_benchmark(committed_client, "named", capability="knowledge", n_models=8, n_items=12, numeric_ids=False)
    coreset = create_coreset(committed_client, {"method": "random", "benchmarks": ["named"], "budget": 4})
    page = html(committed_client, f"/ui/coresets/{coreset['id']}")
    assert '<button class="button" type="button" data-export="lm-eval" disabled' in page
    assert "lm-eval export unavailable" in page and "doc indices" in page
    assert "POST /v1/imports/lm-eval" in page and "use the inspect, JSONL or CSV export" in page  # what to do
    assert 'data-export="inspect" href=' in page and 'data-export="csv" href=' in page


def test_unknown_ids_are_html_404_pages(client) -> None:
    for path in ("/ui/benchmarks/nope", "/ui/sessions/ss_000000000000000000000000", "/ui/coresets/cs_nope",
                 "/ui/jobs/job_nope", "/ui/sessions/ss_x/live"):
        page = html(client, path, 404)
        assert "Go to the home page" in page, path
    assert "Invalid" in html(client, "/ui/?benchmarks_cursor=garbage!", 422)
    assert "name at least two benchmarks" in html(client, "/ui/similarity?benchmarks=nope", 422)
    assert "does not exist" in html(client, "/ui/similarity?benchmarks=nope&benchmarks=nada", 404)


def test_session_page_names_the_methods_interval(client) -> None:
    # issue 34: the session chart called active_design's confidence sequence and random's exact interval
    # "95% credible interval"; the page, its chart and the plot endpoint name each method's own interval
    data = create_benchmark(client, "named", capability="knowledge", n_models=12, n_items=30, seed=3, text=False)
    expected = {"active_design": "95% sequential confidence interval (valid at the stop)",
                "random": "95% confidence interval (fixed n)", "bayesame": "95% credible interval (posterior)"}
    for method, name in expected.items():
        run = run_session(client, data, 1, n=4, method=method)
        page = html(client, f"/ui/sessions/{run['id']}")
        plot = client.get(f"/v1/sessions/{run['id']}/plot.svg").text
        for text in (page, plot):
            assert name in text, (method, name)
            if method != "bayesame":
                assert "credible" not in text, method
