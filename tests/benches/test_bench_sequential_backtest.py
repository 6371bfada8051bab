"""The goal checks of bench/sessions/sequential_backtest_bench.py on hand-made pieces (no shared data, no run)."""

from __future__ import annotations

from typing import Any

from bench.sessions.sequential_backtest_bench import goal_figures, goals, render


def _row(method: str, mae: float, cov_at_stop: float | None, items: float, reached: float) -> dict[str, Any]:
    stops = [{"half_width": 0.02, "mean_items": items, "reached": reached, "coverage_at_stop": cov_at_stop},
             {"half_width": 0.01, "mean_items": 300.0, "reached": 0.0, "coverage_at_stop": float("nan")}]
    return {"method": method, "mae": {str(b): mae for b in (25, 50, 100, 200)},
            "coverage": {str(b): 0.9 for b in (25, 50, 100, 200)}, "stops": stops}


def _piece(dataset: str, regime: str, n_items: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    setup = {"regime": regime, "n_models": 83, "n_items": n_items, "n_targets": 20, "n_references": 46,
             "gap": 17, "n_max": 300}
    return {"dataset": dataset, "setup": setup, "rows": rows, "methods": [r["method"] for r in rows],
            "default_method": "refgp_ivr", "date": "2026-12-01 20:00 UTC", "seconds": 1.0}


def _pieces() -> list[dict[str, Any]]:
    a = _piece("big", "interpolation", 1000, [
        _row("bayesame", 0.05, 0.95, 200, 0.5), _row("proeval_bq", 0.02, 0.9, 300, 0.0),
        _row("fluid_irt", 0.04, 0.5, 300, 0.0), _row("refgp_ivr", 0.03, 0.95, 120, 1.0),
        _row("refgp_new", 0.01, 0.8, 300, 0.25), _row("rs_mean", 0.025, 0.95, 300, 0.0)])
    b = _piece("small", "extrapolation", 437, [
        _row("proeval_bq", 0.2, None, 200, 0.0), _row("fluid_irt", 0.1, 0.0, 200, 0.1),
        _row("refgp_ivr", 0.05, 0.5, 100, 0.5)])
    return [a, b]


def test_goal_figures_count_wins_misses_coverage_and_precision():
    g = goal_figures(_pieces(), "refgp_ivr")
    (la, wa, ca, ma), (lb, wb, cb, mb) = g["mae"]
    assert (la, wa, ca) == ("big interpolation", 4, 8) and {m[1] for m in ma} == {"proeval_bq"}
    assert (lb, wb, cb, mb) == ("small extrapolation", 8, 8, [])
    # NaN coverage (no target reached) is left out; the count of targets that reached it is kept
    assert g["coverage"] == [("big interpolation", 0.02, 0.95, 20), ("small extrapolation", 0.02, 0.5, 10)]
    assert g["precision"] == [("big interpolation", 0.12, 1.0)]  # only N >= 756


def test_goals_name_the_misses_and_list_every_candidate():
    text = "\n".join(goals(_pieces()))
    assert "in 12 of 16" in text
    assert "big interpolation 4/8 (behind proeval_bq at n=25/50/100/200 by 1.00 points)" in text
    assert "1 of 2 (data set, regime, rule) cells" in text and "small extrapolation ±0.02: 50% of 10" in text
    assert "with at most 15% of the items" in text and ": 1 of 1: big interpolation: 12% (reached 100%)" in text
    # candidates: the default and any other non-peer, non-BayesAME method, each with its own figures
    assert "| `refgp_ivr` (default) | 2 | 12 of 16 | 1 of 2 (72%, 50%-95%) | 1 of 1 | 0 of 4 |" in text
    assert "| `refgp_new` | 1 | 8 of 8 | 0 of 1 (80%, 80%-80%) | 0 of 1 | 4 of 4 |" in text
    assert "`bayesame` |" not in text and "`proeval_bq` |" not in text and "`rs_mean` |" not in text
    # rs_mean is a comparison, never a peer of goal 1
    assert goal_figures(_pieces(), "refgp_ivr", peers=("rs_mean",))["mae"][0][:3] == ("big interpolation", 0, 4)


def test_render_keeps_an_empty_interpretation_for_the_hand_written_text():
    md = render(_pieces())
    assert "<!-- interpretation -->\n<!-- /interpretation -->" in md and "#### Goals of issue 11" in md
