"""Pure helpers of bench/coresets/multi_benchmark_accuracy.py on tiny generated data (no shared data)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

# bench/ is not an installed package: load the script by path
_spec = importlib.util.spec_from_file_location(
    "multi_benchmark_accuracy", Path(__file__).resolve().parents[2] / "bench" / "coresets" / "multi_benchmark_accuracy.py")
mba = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mba)
END, METHODS, START = mba.END, mba.METHODS, mba.START
run_trial, write_section = mba.run_trial, mba.write_section


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
