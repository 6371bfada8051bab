"""Issue 32 item 1: the chart renderer cannot take the serving process down.

The hostile text goes straight to the render pool (no sanitising on the way): vl-convert aborts the worker
process on it, and this (the serving) process gets :class:`RenderFailed` and keeps rendering with a fresh
worker. Before the fix vl-convert ran in-process, so the first case aborted pytest itself.
"""

from __future__ import annotations

import json
import os

import altair as alt
import pytest

from evalplan.charts import render
from evalplan.charts.render import RenderFailed, RenderPool, spec_of, to_inline_svg, to_svg

HOSTILE = ["nul\u0000here", "esc\u001b[31mred", "\u202eright-to-left", "del\u007f c1\u0085", "x" * 50_000]


def _spec(text: str) -> dict:
    return {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "title": text,
            "data": {"values": [{"a": 1, "b": text}]}, "mark": "bar",
            "encoding": {"x": {"field": "a", "type": "quantitative"}, "y": {"field": "b", "type": "nominal"}}}


@pytest.fixture(scope="module")
def pool():
    pool = RenderPool(size=1)
    yield pool
    while not pool.idle.empty():
        pool.idle.get_nowait().stop()


def test_hostile_text_given_raw_to_the_renderer_kills_only_its_worker(pool: RenderPool) -> None:
    me = os.getpid()
    good = json.dumps(_spec("fine"))
    assert pool.render("svg", good).startswith(b"<svg")
    first = pool.idle.queue[0].proc.pid
    with pytest.raises(RenderFailed) as failed:
        pool.render("svg", json.dumps(_spec("evil\u001ctarget")))  # vl-convert's abort, in the worker
    assert failed.value.status == 503 and "worker exit status" in failed.value.detail
    assert os.getpid() == me  # still here
    assert pool.render("svg", good).startswith(b"<svg")  # a fresh worker took over
    assert pool.idle.queue[0].proc.pid != first and pool.started == 1
    with pytest.raises(RenderFailed):
        pool.render("png", json.dumps(_spec("bell\u0007")))
    for text in HOSTILE:
        try:
            assert pool.render("svg", json.dumps(_spec(text)), timeout=8).startswith(b"<svg")
        except RenderFailed:
            pass  # a crash, a refusal or a timeout: reported, never fatal
    assert pool.render("png", good)[:4] == b"\x89PNG"


def test_a_render_that_takes_too_long_is_killed(pool: RenderPool) -> None:
    with pytest.raises(RenderFailed, match="longer than"):
        pool.render("svg", json.dumps(_spec("slow " * 10)), timeout=0.001)
    assert pool.render("svg", json.dumps(_spec("after"))).startswith(b"<svg")


@pytest.mark.parametrize("text", ["evil\u001ctarget", "bell\u0007", *HOSTILE])
def test_the_public_functions_draw_hostile_text_as_visible_stand_ins(text: str) -> None:
    chart = alt.Chart(alt.Data(values=[{"a": 1, "b": text}])).mark_bar().encode(x="a:Q", y="b:N").properties(
        title=f"{text} on b")
    spec_text = json.dumps(spec_of(chart), ensure_ascii=False)
    assert not any(c in spec_text for c in "\u0000\u0007\u001b\u001c\u007f\u0085")  # stand-ins instead
    svg = to_svg(chart)
    assert svg.startswith("<svg") and not any(0 < ord(c) < 0x20 and c not in "\t\n\r" for c in svg)
    assert "\u0000" not in svg and len(svg) < 200_000  # the 50,000-character label is cut
    page = to_inline_svg(chart, label=f"chart of {text}", prefix="t")
    assert page.startswith("<svg role=\"img\"")


def test_a_page_shows_a_note_when_the_renderer_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise RenderFailed("the chart renderer failed on this chart (worker exit status -6)")

    monkeypatch.setattr(render, "_svg", broken)
    chart = alt.Chart(alt.Data(values=[{"a": 1}])).mark_bar().encode(x="a:Q")
    note = to_inline_svg(chart, label="A chart", prefix="c")
    assert note.startswith('<p class="chart-failed"') and "could not be drawn" in note


def test_a_plot_route_answers_a_503_problem_when_the_renderer_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from evalplan.charts.http import chart_response
    from evalplan.kit.problems import install_problem_handlers

    def broken(*args, **kwargs):
        raise RenderFailed("the chart renderer failed on this chart (worker exit status -6)")

    monkeypatch.setattr(render, "_svg", broken)
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/plot.svg")
    def plot():  # type: ignore[no-untyped-def]
        return chart_response(_spec("x"), "svg", "s")

    r = TestClient(app).get("/plot.svg")
    assert r.status_code == 503 and r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["type"] == "urn:evalplan:problem:chart-render-failed" and "exit status -6" in r.json()["detail"]
