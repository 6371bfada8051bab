"""Chart downloads: GET /v1/sessions/{id}/plot.svg, /v1/coresets/{id}/plot.svg, /v1/jobs/{id}/plot.svg
(image/svg+xml; plot.png too), drawn from the same services as the pages; and the observations list."""

from __future__ import annotations

import pytest

from support.svg_marks import band_widths, mark_items, texts
from support.ui_data import create_benchmark, create_coreset, run_session, wait_for_job


@pytest.fixture
def data(committed_client) -> dict:
    return create_benchmark(committed_client, "plotbench", capability="reasoning", n_models=24, n_items=50,
                            text=False)


def test_session_plot_and_observations(committed_client, data) -> None:
    http = committed_client
    session = run_session(http, data, 3, n=12)
    r = http.get(f"/v1/sessions/{session['id']}/plot.svg")
    assert r.status_code == 200 and r.headers["content-type"] == "image/svg+xml"
    assert len(mark_items(r.text, "observation")) == session["n_observed"] == 12
    widths = band_widths(mark_items(r.text, "band")[0].get("d"))
    assert widths[-1][1] < widths[0][1]
    # model-03's scores are stored for every item: its true score is drawn, and so is BayesAME's threshold
    assert "true score" in texts(r.text) and len(mark_items(r.text, "true_score")) == 1
    assert len(mark_items(r.text, "stop_threshold")) == 1
    png = http.get(f"/v1/sessions/{session['id']}/plot.png")
    assert png.status_code == 200 and png.content[:4] == b"\x89PNG"
    assert http.get(f"/v1/sessions/{session['id']}/plot.gif").status_code == 422
    missing = http.get("/v1/sessions/ss_000000000000000000000000/plot.svg")
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"

    page = http.get(f"/v1/sessions/{session['id']}/observations", params={"limit": 5}).json()
    assert [o["n"] for o in page["items"]] == [12, 11, 10, 9, 8] and page["next_cursor"]
    rest = http.get(f"/v1/sessions/{session['id']}/observations", params={"cursor": page["next_cursor"]}).json()
    assert [o["n"] for o in rest["items"]] == list(range(7, 0, -1)) and rest["next_cursor"] is None
    scores = data["scores"][3]
    assert all(o["score"] == scores[data["items"].index(o["item"])] for o in page["items"] + rest["items"])
    assert http.get(f"/v1/sessions/{session['id']}/observations", params={"cursor": "bad!"}).status_code == 422


def test_session_of_an_unknown_target_has_no_true_score(committed_client, data) -> None:
    r = committed_client.post("/v1/sessions", json={"benchmark": "plotbench", "target": "new-ckpt"})
    assert r.status_code == 201, r.text
    svg = committed_client.get(f"/v1/sessions/{r.json()['id']}/plot.svg").text
    assert "true score" not in texts(svg) and not mark_items(svg, "observation")


def test_coreset_plot_shows_composition_and_held_out_predictions(committed_client, data) -> None:
    coreset = create_coreset(committed_client, {"method": "mrmr", "benchmarks": ["plotbench"], "budget": 6,
                                                "reference_models": "all"})
    r = committed_client.get(f"/v1/coresets/{coreset['id']}/plot.svg")
    assert r.status_code == 200 and r.headers["content-type"] == "image/svg+xml"
    words = texts(r.text)
    assert "6 of 50 (12.0%)" in words and "true score" in words and "predicted score" in words
    assert len(mark_items(r.text, "model")) == 24  # every reference model, predicted out of fold
    assert len(mark_items(r.text, "interval")) == 24


def test_backtest_job_plot(committed_client, data) -> None:
    r = committed_client.post("/v1/backtests", json={"benchmarks": "plotbench", "methods": ["random", "mrmr"],
                                                     "budgets": [0.1, 0.2], "n_reference": 16, "seeds": 2})
    assert r.status_code == 202, r.text
    job = wait_for_job(committed_client, r.json()["job"]["id"])
    svg = committed_client.get(f"/v1/jobs/{job['id']}/plot.svg")
    assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
    assert len(mark_items(svg.text, "rmse")) == 2 and "RMSE (score units)" in texts(svg.text)
    stats = committed_client.get("/v1/benchmarks/plotbench/stats")
    assert stats.status_code == 202  # a job kind without a chart
    wait_for_job(committed_client, stats.json()["job"]["id"])
    other = committed_client.get(f"/v1/jobs/{stats.json()['job']['id']}/plot.svg")
    assert other.status_code == 409 and other.headers["content-type"] == "application/problem+json"
