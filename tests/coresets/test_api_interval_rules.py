"""The ``calibrated`` interval rule everywhere a static score-based coreset reports an interval (issue 16
§2), with the default ``extended`` rule's shrinkage extension on top (issue 35 item 1), over HTTP on GENERATED
2-PL benchmarks: ``method: "auto"``, the IRT predictors (``gp_irt``) and the multi-benchmark overall / capability
intervals; ``params.interval: "calibrated"`` is the rule without the extension, ``"conformal"`` the old rule."""

from __future__ import annotations

import numpy as np
import pytest
from test_api_score_coresets import N_ITEMS, N_REF, create, make_suite, stored_fits, target_scores, upload

from evalplan.core.coresets.intervals import (
    fixed_coreset_errors,
    pooled_errors,
    shrinkage_extended_interval,
    top_widened_interval,
)
from evalplan.core.coresets.predictors import KernelRidgePredictor
from support.helpers import wait_for_job

LEVEL = 0.95  # every prediction's interval level unless the request asks for another (issue 26 item 5)

FAST_AUTO = {"selectors": ["random", "mrmr"], "max_seconds": 120}
TINY_IRT = {"epochs": 30, "dim": 1}  # 7 SVI fits per coreset (2, then one per fold): kept small for the shared machine


def create_slow(client, **body) -> dict:
    """``create`` with a longer job timeout (the IRT folds are SVI fits)."""
    r = client.post("/v1/coresets", json=body)
    assert r.status_code == 202, r.text
    job = wait_for_job(client, r.json()["job"]["id"], timeout=900)
    assert job["status"] == "succeeded", job
    return client.get(f"/v1/coresets/{r.json()['coreset']['id']}").json()


@pytest.fixture(scope="module")
def suite():
    return make_suite(N_ITEMS, seed=7)


def clip(v: float) -> float:
    return min(max(float(v), 0.0), 1.0)


def expected(center, errors, level, fixed, rule, truth):
    """The interval predict answers: the rule with the top-decile widening, extended under ``"extended"``."""
    lo, hi, top = top_widened_interval(center, errors, level, fixed, "calibrated" if rule == "extended" else rule,
                                       truth)
    if rule == "extended" and fixed is not None:
        ext = shrinkage_extended_interval(center, lo, hi, errors, truth)
        lo, hi = ext.lower, ext.upper
    return lo, hi, top


def predict(client, coreset: dict, rows: dict[str, np.ndarray]) -> dict:
    r = client.post(f"/v1/coresets/{coreset['id']}/predict", json={"scores": target_scores(coreset, rows)})
    assert r.status_code == 200, r.text
    return r.json()


def test_auto_reports_the_calibrated_rule(committed_client, committed_session_factory, suite) -> None:
    client = committed_client
    upload(client, "gen", suite["ref"])
    coreset = create(client, method="auto", benchmarks=["gen"], budget=10, reference_models="all", params=FAST_AUTO)
    (bid, fit), = stored_fits(committed_session_factory, coreset["id"]).items()
    cal = fit["calibration"]
    assert cal["kind"] == "cross_fitted" and cal["source"] == "auto_outer_folds"
    X, y = np.asarray(fit["X_ref"]), np.asarray(fit["y_ref"])
    assert len(cal["fixed_errors"]) == N_REF
    if fit["predictor"] == "kernel_ridge":  # the chosen predictor, left one reference out on the chosen coreset
        np.testing.assert_allclose(cal["fixed_errors"], fixed_coreset_errors(KernelRidgePredictor, X, y), atol=1e-9)
    errors, fixed = np.asarray(cal["errors"]), np.asarray(cal["fixed_errors"])
    n_checked = 0
    for target in suite["targets"]:
        out = predict(client, coreset, {"gen": target})
        entry = out["benchmarks"]["gen"]
        if entry["predictor"] != fit["predictor"]:  # the extrapolation guard's AIPW (leave-one-reference-out)
            assert entry["extrapolation"] and "extrapolation" in entry["interval_why"]
            continue
        n_checked += 1
        assert entry["calibration"] == "cross_fitted" and entry["interval_rule"] == "extended"
        assert out["overall"]["interval_rule"] == "extended"
        assert entry["interval_why"].startswith("calibrated: ") and "de-shrunk" in entry["interval_why"]
        lo, hi, top = expected(entry["estimate"], errors, LEVEL, fixed, "extended", y)
        assert entry["interval"] == pytest.approx([clip(lo), clip(hi)], abs=1e-9) and entry["top_decile"] == top
    assert n_checked >= 1
    old = create(client, method="auto", benchmarks=["gen"], budget=10, reference_models="all",
                 params={**FAST_AUTO, "interval": "conformal"})
    target = suite["targets"][0]
    out = predict(client, old, {"gen": target})
    entry = out["benchmarks"]["gen"]
    if entry["calibration"] == "cross_fitted":
        # the same choice and outer folds: the old rank
        lo, hi, _ = top_widened_interval(entry["estimate"], errors, LEVEL, None, "conformal", y)
        assert entry["interval_rule"] == "conformal" and out["overall"]["interval_rule"] == "conformal"
        assert entry["interval"] == pytest.approx([clip(lo), clip(hi)], abs=1e-9)


def test_gp_irt_is_cross_fitted_and_calibrated(committed_client, committed_session_factory, suite) -> None:
    client = committed_client
    upload(client, "gen", suite["ref"])
    coreset = create_slow(client, method="mrmr", benchmarks=["gen"], budget=10, reference_models="all",
                          predictor="gp_irt", params={"irt": TINY_IRT})
    (bid, fit), = stored_fits(committed_session_factory, coreset["id"]).items()
    cal = fit["calibration"]
    # the IRT pipeline (mRMR, the IRT model at the stored dimension, gp-IRT's lambda) refitted on 5 folds;
    # the optimistic half: the references' residuals under the stored IRT model
    assert cal["kind"] == "cross_fitted" and cal["source"] == "irt_folds" and cal["n_folds"] == 5
    assert cal["predictor"] == "gp_irt" and len(cal["errors"]) == N_REF
    assert cal["fixed_errors"] == fit["irt"]["residuals"]["gp_irt"]
    errors, fixed = np.asarray(cal["errors"]), np.asarray(cal["fixed_errors"])
    assert np.isfinite(errors).all()
    assert np.abs(errors - fixed).max() > 1e-6  # held out, not the in-sample residuals
    assert coreset["diagnostics"]["fits_summary"][bid]["calibration"] == "cross_fitted"
    widths = {}
    for target in suite["targets"]:
        out = predict(client, coreset, {"gen": target})
        entry = out["benchmarks"]["gen"]
        if entry["predictor"] != "gp_irt":
            continue
        assert entry["calibration"] == "cross_fitted" and entry["interval_rule"] == "extended"
        assert out["overall"]["interval_rule"] == "extended"
        lo, hi, _ = expected(entry["estimate"], errors, LEVEL, fixed, "extended", fit["y_ref"])
        assert entry["interval"] == pytest.approx([clip(lo), clip(hi)], abs=1e-9)
        widths["extended"] = hi - lo
    assert widths
    # params.interval "conformal": the rule before, on the in-sample residuals; no folds refitted
    old = create_slow(client, method="mrmr", benchmarks=["gen"], budget=10, reference_models="all",
                      predictor="gp_irt", params={"irt": TINY_IRT, "interval": "conformal"})
    (_, old_fit), = stored_fits(committed_session_factory, old["id"]).items()
    assert "calibration" not in old_fit or old_fit["calibration"].get("kind") != "cross_fitted"
    for target in suite["targets"]:
        entry = predict(client, old, {"gen": target})["benchmarks"]["gen"]
        if entry["predictor"] != "gp_irt":
            continue
        assert entry["calibration"] == "reference_residuals" and entry["interval_rule"] == "conformal"
        lo, hi, _ = top_widened_interval(entry["estimate"], np.asarray(old_fit["irt"]["residuals"]["gp_irt"]), LEVEL,
                                         None, "conformal", old_fit["y_ref"])
        assert entry["interval"] == pytest.approx([clip(lo), clip(hi)], abs=1e-9)


def test_multi_benchmark_overall_and_capability_are_calibrated(committed_client, committed_session_factory,
                                                               suite) -> None:
    client = committed_client
    other = make_suite(40, seed=8)
    upload(client, "one", suite["ref"])
    upload(client, "two", other["ref"], n=40)
    coreset = create(client, method="mrmr", benchmarks=["one", "two"], budget=12, reference_models="all")
    fits = stored_fits(committed_session_factory, coreset["id"])
    order = list(coreset["diagnostics"]["per_benchmark"])
    names = dict(zip(order, ["one", "two"]))
    errors = np.vstack([fits[b]["calibration"]["errors"] for b in order])
    fixed = np.vstack([fits[b]["calibration"]["fixed_errors"] for b in order])
    out = predict(client, coreset, {"one": suite["targets"][0], "two": other["targets"][0]})
    if out["extrapolation"]:
        out = predict(client, coreset, {"one": suite["targets"][1], "two": other["targets"][1]})
    assert not out["extrapolation"]
    for b in order:
        assert out["benchmarks"][names[b]]["interval_rule"] == "extended"
    overall = out["overall"]
    assert overall["interval_rule"] == "extended" and overall["interval_why"].startswith("calibrated: ")
    assert overall["estimate"] == pytest.approx(np.mean([out["benchmarks"][n]["estimate"] for n in names.values()]))
    truth = np.mean([fits[b]["y_ref"] for b in order], axis=0)  # the aggregate's reference scores (top widening)
    lo, hi, _ = expected(overall["estimate"], pooled_errors(errors), LEVEL, pooled_errors(fixed), "extended", truth)
    assert overall["interval"] == pytest.approx([clip(lo), clip(hi)], abs=1e-9)
    old_lo, old_hi, _ = top_widened_interval(overall["estimate"], pooled_errors(errors), LEVEL, None, "conformal",
                                             truth)
    assert (hi - lo) != pytest.approx(old_hi - old_lo)  # not the old rule's width
    # one benchmark per capability (each benchmark is its own capability): its own rule and interval
    for name, cap in out["capabilities"].items():
        assert cap["interval_rule"] == "extended" and cap["n_benchmarks"] == 1
        assert cap["interval"] == pytest.approx(out["benchmarks"][name]["interval"], abs=1e-9)
    old = create(client, method="mrmr", benchmarks=["one", "two"], budget=12, reference_models="all",
                 params={"interval": "conformal"})
    out_old = predict(client, old, {"one": suite["targets"][0], "two": other["targets"][0]})
    if not out_old["extrapolation"]:
        assert out_old["overall"]["interval_rule"] == "conformal"
        lo, hi, _ = top_widened_interval(out_old["overall"]["estimate"], pooled_errors(errors), LEVEL, None,
                                         "conformal", truth)
        assert out_old["overall"]["interval"] == pytest.approx([clip(lo), clip(hi)], abs=1e-9)
