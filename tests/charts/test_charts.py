"""Charts from plain rows: readable (titles, axis titles with units, legends) and faithful to
their data (one symbol per observation, a band that narrows, NaNs left out), rendered offline."""

from __future__ import annotations

import math
import re

import pytest

from evalplan import charts
from support.svg_marks import band_widths, mark_items, texts


def trajectory_rows(n: int) -> list[dict]:
    rows = []
    for i in range(1, n + 1):
        half = 0.4 / math.sqrt(i)
        estimate = 0.6 + 0.05 * math.sin(i) / math.sqrt(i)
        rows.append({"n": i, "estimate": estimate, "variance": (half / 1.96) ** 2,
                     "ci": [max(0.0, estimate - half), min(1.0, estimate + half)]})
    return rows


def test_session_trajectory_has_one_point_per_observation_and_a_narrowing_band() -> None:
    chart = charts.session_trajectory(trajectory_rows(40), true_score=0.61, stop_half_width=0.08)
    svg = charts.to_svg(chart)
    assert len(mark_items(svg, "observation")) == 40
    (band,) = mark_items(svg, "band")
    widths = band_widths(band.get("d"))
    assert len(widths) == 40
    assert widths[-1][1] < widths[0][1] / 3  # 0.4/sqrt(40) vs 0.4 (the first one clipped at 1.0)
    assert len(mark_items(svg, "true_score")) == 1 and len(mark_items(svg, "stop_threshold")) == 1
    words = texts(svg)
    for expected in ("items observed (n)", "score", "half-width (score units)", "estimate",
                     "95% interval", "true score", "stop threshold", "Estimate after each observation"):
        assert expected in words, expected


def test_session_trajectory_without_truth_or_threshold_and_with_a_level() -> None:
    svg = charts.to_svg(charts.session_trajectory(trajectory_rows(3), level=0.9))
    words = texts(svg)
    assert "90% interval" in words and "true score" not in words and "stop threshold" not in words
    assert not mark_items(svg, "true_score") and not mark_items(svg, "stop_threshold")
    assert len(mark_items(svg, "observation")) == 3


def test_session_trajectory_names_the_methods_interval() -> None:
    # issue 34: every band was a "credible interval", also active_design's confidence sequence
    svg = charts.to_svg(charts.session_trajectory(trajectory_rows(5),
                                                  band_name="95% confidence sequence (anytime-valid)"))
    words = texts(svg)
    assert "95% confidence sequence (anytime-valid)" in words
    assert not any("credible" in w for w in words)


def test_paired_difference_draws_the_fixed_interval_its_legend_names() -> None:
    # issue 34: the legend named "95% interval at the last n", drawn on the sequence's last column (unseen)
    rows = [{"n": n, "interval": [0.05 - 0.5 / math.sqrt(n), 0.05 + 0.5 / math.sqrt(n)]} for n in range(1, 41)]
    chart = charts.paired_difference(rows, level=0.95, fixed=(-0.02, 0.12), difference=0.05)
    spec = chart.to_dict()
    layers = {layer.get("name"): layer for layer in spec["layer"]}
    fixed_n = layers["fixed_interval"]["data"]["values"][0]["n"]
    assert fixed_n > 40  # beside the sequence, not on top of its last step
    x_domain = layers["sequence"]["encoding"]["x"]["scale"]["domain"]
    assert x_domain[0] == 0 and x_domain[1] > fixed_n
    svg = charts.to_svg(chart)
    assert len(mark_items(svg, "fixed_interval")) == 1 and len(mark_items(svg, "mean_difference")) == 1
    words = texts(svg)
    assert "fixed-n 95% interval at n = 40" in words and "anytime 95% confidence sequence" in words
    bare = texts(charts.to_svg(charts.paired_difference(rows, level=0.95)))
    assert not any("fixed-n" in w or "mean difference" in w for w in bare)  # not drawn: not in the legend


def test_bounded_scores_clip_the_band_to_the_score_range() -> None:
    rows = [{"n": 1, "estimate": 0.5, "ci": [-0.8, 1.6]}, {"n": 2, "estimate": 0.5, "ci": [0.2, 0.8]}]
    svg = charts.to_svg(charts.session_trajectory(rows, score_range=(0.0, 1.0)))
    labels = [t for t in texts(svg) if re.fullmatch(r"[\u2212-]?\d\.\d", t)]
    values = [float(t.replace("\u2212", "-")) for t in labels]
    assert min(values) == 0.0 and max(values) == 1.0  # the score axis is [0, 1], not [-0.8, 1.6]


def test_empty_trajectory_still_renders_axes() -> None:
    svg = charts.to_svg(charts.session_trajectory([]))
    assert "items observed (n)" in texts(svg) and not mark_items(svg, "observation")


def test_coreset_composition_counts_items_per_benchmark_and_capability() -> None:
    rows = [{"benchmark": "gsm8k", "capability": "math", "selected": 30, "total": 1319},
            {"benchmark": "arc", "capability": "reasoning", "selected": 12, "total": 1172},
            {"benchmark": "math_hard", "capability": "math", "selected": 8, "total": 1324}]
    svg = charts.to_svg(charts.coreset_composition(rows))
    assert len(mark_items(svg, "benchmark_bars")) == 3
    assert len(mark_items(svg, "capability_bars")) == 2  # math is summed over two benchmarks
    words = texts(svg)
    assert "30 of 1319 (2.3%)" in words and "capability" in words and "items in the coreset" in words


def test_gain_curve_drops_missing_gains() -> None:
    rows = [{"benchmark": "quiz", "rank": i, "gain": 10 / i} for i in range(1, 13)]
    rows.append({"benchmark": "quiz", "rank": 13, "gain": None})
    svg = charts.to_svg(charts.gain_curve(rows))
    words = texts(svg)
    assert "items selected (greedy order)" in words and "share of the final objective" in words
    assert "marginal gain (facility-location objective)" in words
    assert len(mark_items(svg, "marginal_gain")) == 1


def test_predicted_vs_true_draws_points_intervals_and_the_diagonal() -> None:
    rows = [{"model": f"m{i}", "benchmark": "b", "true": i / 10, "predicted": i / 10 + 0.01,
             "lo": i / 10 - 0.05, "hi": i / 10 + 0.05} for i in range(1, 9)]
    rows.append({"model": "no-truth", "benchmark": "b", "true": None, "predicted": 0.5})
    svg = charts.to_svg(charts.predicted_vs_true(rows, level=0.9))
    assert len(mark_items(svg, "model")) == 8 and len(mark_items(svg, "interval")) == 8
    assert len(mark_items(svg, "diagonal")) == 1
    assert {"true score", "predicted score"} <= set(texts(svg))


def test_backtest_curves_one_line_per_method_per_benchmark() -> None:
    rows = [{"benchmark": b, "label": m, "budget": budget, "seed": s, "rmse": 0.1 * budget + s / 100,
             "coverage": None if m == "irt" else 0.85}
            for b in ("musr", "bbh") for m in ("random", "mrmr", "irt") for budget in (0.05, 0.1) for s in range(3)]
    svg = charts.to_svg(charts.backtest_curves(rows, level=0.9))
    words = texts(svg)
    for expected in ("musr: RMSE", "bbh: RMSE", "RMSE (score units)", "interval coverage", "budget (share of items)",
                     "random", "mrmr", "irt", "method"):
        assert expected in words, expected
    assert len(mark_items(svg, "rmse")) == 2 * 3  # a line per method and benchmark
    assert len(mark_items(svg, "coverage")) == 2 * 2  # irt has no intervals
    assert len(mark_items(svg, "nominal_level")) == 2


def test_similarity_heatmap_keeps_the_given_order() -> None:
    names = ["c", "a", "b"]
    matrix = [[1.0, 0.2, -0.3], [0.2, 1.0, 0.5], [-0.3, 0.5, None]]
    svg = charts.to_svg(charts.similarity_heatmap(names, matrix, value_title="Spearman correlation"))
    assert len(mark_items(svg, "cell")) == 8  # the missing cell stays blank
    words = texts(svg)
    assert "Spearman correlation" in words and "-0.30" in words.__str__().replace("\u2212", "-")
    labels = [w for w in words if w in names]
    assert labels[:3] == names  # the first axis lists the benchmarks in the given order


@pytest.mark.parametrize("values", [[0.1, 0.2, 0.2, float("nan"), None, 0.9], []])
def test_histogram(values) -> None:
    svg = charts.to_svg(charts.histogram(values, x_title="mean score", count_title="models", title="Model means"))
    words = texts(svg)
    assert "mean score" in words and "models" in words
    assert f"{sum(1 for v in values if v is not None and not math.isnan(v))} values" in words


def test_inline_svg_is_labelled_and_namespaced() -> None:
    chart = charts.histogram([1, 2, 3], x_title="x", count_title="n", title="T")
    inline = charts.to_inline_svg(chart, label="Histogram of x", prefix="hist")
    assert inline.startswith('<svg role="img" aria-label="Histogram of x"')
    assert "<title>Histogram of x</title>" in inline and 'data-chart="hist"' in inline
    heatmap = charts.similarity_heatmap(["a", "b"], [[1.0, 0.5], [0.5, 1.0]])  # its legend has a gradient id
    ids = re.findall(r'\bid="([^"]+)"', charts.to_svg(heatmap))
    inline = charts.to_inline_svg(heatmap, label="Similarity", prefix="sim")
    assert ids and all(f'id="sim-{i}"' in inline and f"url(#sim-{i})" in inline for i in ids)


def test_png_rendering() -> None:
    png = charts.to_png(charts.histogram([1, 2, 3], x_title="x", count_title="n", title="T"))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000
