"""Pure helpers of bench/multi_benchmark_accuracy.py on tiny generated data (no shared data)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

# bench/ is not an installed package: load the script by path
_spec = importlib.util.spec_from_file_location(
    "multi_benchmark_accuracy", Path(__file__).resolve().parents[1] / "bench" / "multi_benchmark_accuracy.py")
mba = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mba)
END, METHODS, START = mba.END, mba.METHODS, mba.START
combine_overall, run_trial, split_budget, write_section = (mba.combine_overall, mba.run_trial, mba.split_budget,
                                                           mba.write_section)


def test_split_budget_is_proportional_total_and_at_least_one():
    sizes = [1000, 437, 567, 1000, 500]
    assert split_budget(sizes, 0.05) == [50, 22, 28, 50, 25]  # 175 = round(0.05 * 3504)
    assert sum(split_budget(sizes, 0.1)) == 350
    tiny = split_budget([1000, 3, 2], 0.002)  # total max(3, round(2.01)) = 3: one each
    assert tiny == [1, 1, 1]


def test_combine_overall_mean_and_pooled_quantile():
    centers = np.array([[0.2, 0.5], [0.4, 0.9]])
    E = [np.arange(1, 101) / 1000.0, -np.arange(1, 101) / 2000.0]  # M = 100, partly cancelling
    est, lo, hi = combine_overall(centers, E, level=0.9)
    # pooled errors = (i/1000 - i/2000) / 2 = i/4000; rank ceil(101 * 0.9) = 91 -> q = 91/4000
    np.testing.assert_allclose(est, [0.3, 0.7])
    np.testing.assert_allclose(hi - est, [91 / 4000] * 2)
    np.testing.assert_allclose(lo, [0.3 - 91 / 4000, 0.7 - 91 / 4000])
    # M = 30, B = 5: finite (a Bonferroni union would need rank 31 > 30), clipped to [0, 1]
    est, lo, hi = combine_overall(np.full((5, 1), 0.5), [np.full(30, 0.01)] * 5, level=0.9)
    np.testing.assert_allclose([lo[0], hi[0]], [0.49, 0.51])
    est, lo, hi = combine_overall(np.full((5, 1), 0.99), [np.full(30, 0.05)] * 5, level=0.9)
    assert hi[0] == 1.0


def test_write_section_replaces_only_between_markers_and_keeps_interpretation(tmp_path):
    p = tmp_path / "R.md"
    p.write_text("# Results\n\nother\n")
    write_section(p, f"{START}\nv1\n<!-- interpretation -->\n<!-- /interpretation -->\n{END}")
    assert p.read_text().startswith("# Results\n\nother\n\n" + START)
    text = p.read_text().replace("<!-- interpretation -->\n", "<!-- interpretation -->\nby hand\n")
    p.write_text(text + "\ntail\n")
    write_section(p, f"{START}\nv2\n<!-- interpretation -->\n<!-- /interpretation -->\n{END}")
    out = p.read_text()
    assert "v2" in out and "v1" not in out and "by hand" in out and out.endswith(f"{END}\n\ntail\n")
    assert out.count(START) == 1


@pytest.mark.parametrize("fraction", [0.1])
def test_run_trial_on_tiny_suite(fraction):
    rng = np.random.default_rng(0)
    ability = rng.normal(size=40)
    mats = []
    for n in (30, 20):
        diff = rng.normal(size=n)
        mats.append((rng.random((40, n)) < 1 / (1 + np.exp(-(ability[:, None] - diff)))).astype(float))
    methods = [m for m in METHODS if m[1] in ("random", "mrmr")]
    rows = run_trial(mats, seed=1, fraction=fraction, methods=methods, n_reference=12)
    assert [r["label"] for r in rows] == [m[0] for m in methods]
    for r in rows:
        assert r["counts"] == [3, 2] and r["n_test"] == 28
        assert np.isfinite(r["rmse"]) and 0.0 <= r["coverage"] <= 1.0
        assert {"rmse_0", "rmse_1", "kendall_0", "kendall_1"} <= set(r)
