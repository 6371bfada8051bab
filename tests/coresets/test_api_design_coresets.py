"""``params.interval: "design"`` on score-based coresets (issue 25 §3), over HTTP on GENERATED 2-PL benchmarks:
the coreset is a stratified draw with recorded inclusion probabilities (optionally with the method's selection
taken whole, ``params.method_share``), predict answers the difference estimator and its design interval, and
every bad combination is a located 422 that stores nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sqlalchemy import func, select
from test_api_score_coresets import N_ITEMS, create, make_suite, stored_fits, target_scores, upload

from evalplan.core.coresets.design_coreset import DesignCoreset, design_estimate, mean_of_estimates
from evalplan.db.models import Coreset

LEVEL = 0.95
DESIGN = {"interval": "design"}


@pytest.fixture(scope="module")
def suite():
    return make_suite(N_ITEMS, seed=3)


def predict(client, coreset: dict, rows: dict[str, np.ndarray], **extra) -> dict:
    r = client.post(f"/v1/coresets/{coreset['id']}/predict", json={"scores": target_scores(coreset, rows), **extra})
    assert r.status_code == 200, r.text
    return r.json()


def scores_at(coreset: dict, bench: str, row: np.ndarray) -> np.ndarray:
    """The target's scores at the coreset's items of ``bench`` in the stored draw's order (item columns in
    upload order, which the generated ids ``q000`` ... sort in)."""
    return np.array([row[int(i[1:])] for i in sorted(i["item"] for i in coreset["items"] if i["benchmark"] == bench)],
                    dtype=float)


def expected(fit: dict, coreset: dict, bench: str, row: np.ndarray, level: float = LEVEL):
    """The core's estimate from the stored draw."""
    return design_estimate(DesignCoreset.from_state(fit["design"]), scores_at(coreset, bench, row), level=level)


def test_design_coreset_draws_with_known_probabilities_and_predicts_its_interval(
        committed_client, committed_session_factory, suite) -> None:
    client = committed_client
    upload(client, "gen", suite["ref"])
    coreset = create(client, method="mrmr", benchmarks=["gen"], budget=20, reference_models="all", params=DESIGN)
    assert coreset["predictor"] == "design" and len(coreset["items"]) == 20
    summary = coreset["diagnostics"]["fits_summary"]
    (bid, s), = summary.items()
    assert s["calibration"] == "design" and s["design"]["method_items"] == 0
    strata = s["design"]["strata"]
    assert sum(h["size"] for h in strata) == N_ITEMS and sum(h["drawn"] for h in strata) == 20
    assert all(h["drawn"] >= 2 and not h["take_all"] for h in strata)
    (fit,) = stored_fits(committed_session_factory, coreset["id"]).values()
    design = DesignCoreset.from_state(fit["design"])
    # each item's weight is its design weight 1 / pi; they add up to the benchmark's size
    assert sum(i["weight"] for i in coreset["items"]) == pytest.approx(N_ITEMS)
    assert sorted(i["weight"] for i in coreset["items"]) == pytest.approx(sorted((1.0 / design.inclusion).tolist()))
    for target in suite["targets"]:
        out = predict(client, coreset, {"gen": target})
        entry, e = out["benchmarks"]["gen"], expected(fit, coreset, "gen", target)
        assert entry["interval_rule"] == entry["calibration"] == entry["predictor"] == "design"
        assert entry["method"] == "mrmr+design" and entry["n_items"] == 20 and entry["n_total"] == N_ITEMS
        assert entry["estimate"] == pytest.approx(e.estimate, abs=1e-12)
        assert entry["interval"] == pytest.approx([e.lower, e.upper], abs=1e-12)
        assert entry["std_error"] == pytest.approx(e.std_error, abs=1e-12) and entry["std_error"] > 0
        assert out["overall"]["estimate"] == pytest.approx(e.estimate) and out["overall"]["interval_rule"] == "design"
        assert out["overall"]["interval"] == pytest.approx(entry["interval"])
    # a target that solves everything: above every reference, flagged, and the interval is still the design's
    top = predict(client, coreset, {"gen": np.ones(N_ITEMS, dtype=int)}, level=0.9)
    assert top["extrapolation"] is True and top["benchmarks"]["gen"]["estimate"] == pytest.approx(1.0, abs=0.01)
    assert top["benchmarks"]["gen"]["interval"][0] < 1.0 and top["level"] == 0.9
    # the same request again draws the same items (seeded); another seed draws others
    again = create(client, method="mrmr", benchmarks=["gen"], budget=20, reference_models="all", params=DESIGN)
    assert [i["item"] for i in again["items"]] == [i["item"] for i in coreset["items"]]
    other = create(client, method="mrmr", benchmarks=["gen"], budget=20, reference_models="all", params=DESIGN,
                   seed=5)
    assert {i["item"] for i in other["items"]} != {i["item"] for i in coreset["items"]}
    # the coreset page's reference chart: each reference's design estimate from its own scores
    r = client.get(f"/v1/coresets/{coreset['id']}/plot.svg")
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml"), r.text
    page = client.get(f"/ui/coresets/{coreset['id']}")
    assert page.status_code == 200 and "design estimate (difference estimator)" in page.text


def test_method_share_takes_the_methods_selection_whole(committed_client, committed_session_factory, suite) -> None:
    client = committed_client
    upload(client, "gen", suite["ref"])
    plain = create(client, method="mrmr", benchmarks=["gen"], budget=10, reference_models="all")
    mixed = create(client, method="mrmr", benchmarks=["gen"], budget=20, reference_models="all",
                   params={**DESIGN, "method_share": 0.5})
    # the method's 10 items come first, in its order, with inclusion probability 1 (weight 1)
    assert [i["item"] for i in mixed["items"][:10]] == [i["item"] for i in plain["items"]]
    assert all(i["weight"] == 1.0 for i in mixed["items"][:10]) and all(i["weight"] > 1 for i in mixed["items"][10:])
    (bid, s), = mixed["diagnostics"]["fits_summary"].items()
    assert s["design"]["method_items"] == 10 and s["design"]["strata"][-1] == {"size": 10, "drawn": 10,
                                                                               "take_all": True}
    (fit,) = stored_fits(committed_session_factory, mixed["id"]).values()
    target = suite["targets"][0]
    entry = predict(client, mixed, {"gen": target})["benchmarks"]["gen"]
    assert entry["estimate"] == pytest.approx(expected(fit, mixed, "gen", target).estimate, abs=1e-12)


def test_two_benchmarks_overall_is_the_mean_of_independent_draws(committed_client, committed_session_factory) -> None:
    client = committed_client
    a, b = make_suite(N_ITEMS, seed=11), make_suite(N_ITEMS, seed=12)
    upload(client, "ga", a["ref"])
    upload(client, "gb", b["ref"])
    coreset = create(client, method="pbsc", benchmarks=["ga", "gb"], budget={"fraction": 0.25},
                     reference_models="all", params=DESIGN)
    fits = stored_fits(committed_session_factory, coreset["id"])
    bid = {n: client.get(f"/v1/benchmarks/{n}").json()["id"] for n in ("ga", "gb")}
    rows = {"ga": a["targets"][0], "gb": b["targets"][0]}
    out = predict(client, coreset, rows)
    parts = [expected(fits[bid[n]], coreset, n, rows[n]) for n in ("ga", "gb")]
    for n, e in zip(("ga", "gb"), parts):
        assert out["benchmarks"][n]["estimate"] == pytest.approx(e.estimate, abs=1e-12)
    combined = mean_of_estimates(parts, LEVEL, 0.0, 1.0)
    assert out["overall"]["estimate"] == pytest.approx(combined.estimate, abs=1e-12)
    assert out["overall"]["interval"] == pytest.approx([combined.lower, combined.upper], abs=1e-12)
    assert out["overall"]["std_error"] == pytest.approx(combined.std_error, abs=1e-12)
    assert out["overall"]["std_error"] < max(out["benchmarks"][n]["std_error"] for n in ("ga", "gb"))


BAD = {
    "predictor with design": ({"predictor": "ridge", "params": DESIGN}, "predictor"),
    "method_share without design": ({"params": {"method_share": 0.5}}, "params.method_share"),
    "method_share of 1": ({"params": {**DESIGN, "method_share": 1.0}}, "params.method_share"),
    "method_share not a number": ({"params": {**DESIGN, "method_share": "half"}}, "params.method_share"),
    "method_share with auto": ({"method": "auto", "params": {**DESIGN, "method_share": 0.5}}, "params.method_share"),
    "one item to draw": ({"budget": 1, "params": DESIGN}, "at least 2 drawn"),
    "take-all leaves one to draw": ({"budget": 3, "params": {**DESIGN, "method_share": 0.6}}, "at least 2 drawn"),
}


def test_bad_design_requests_are_422_and_store_nothing(committed_client, committed_session_factory, suite) -> None:
    client = committed_client
    upload(client, "gen", suite["ref"])
    for case, (override, needle) in BAD.items():
        request = {"method": "mrmr", "benchmarks": ["gen"], "budget": 10, "reference_models": "all", **override}
        r = client.post("/v1/coresets", json=request)
        assert r.status_code == 422, (case, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert needle.lower() in json.dumps(r.json()).lower(), (case, r.json())
    for route, body in (("/v1/plans", {"benchmarks": "gen", "half_width": 0.08, "methods": ["mrmr:kernel_ridge"]}),
                        ("/v1/backtests", {"benchmarks": "gen", "methods": ["mrmr"], "budgets": [0.2],
                                           "n_reference": 20})):
        r = client.post(route, json={**body, "params": {"mrmr": DESIGN}})
        assert r.status_code == 422 and "params.mrmr.interval" in r.text, (route, r.text)
    with committed_session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Coreset)) == 0
