"""Chart builders: plain rows in, an altair (Vega-Lite) chart out.

Every function takes lists of dicts or lists of numbers (what the services return), never a
database object, so a notebook or a test can call it directly. Every chart has axis titles with
units, a legend where colour carries meaning, and a title; aggregation over seeds is done by
Vega-Lite itself (``mean``, ``stderr``), not by hand.

Named marks give the SVG stable class names (``<name>_marks``) that the browser tests count,
e.g. ``observation_marks`` holds one symbol per observation of a session.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import altair as alt

WIDTH = 560
HEIGHT = 280
FONT = "DejaVu Sans, Verdana, Helvetica, Arial, sans-serif"
# Colours chosen for >= 3:1 contrast against white (WCAG 2.2 non-text contrast).
INK = {"estimate": "#1b5bab", "interval": "#8fb4e3", "true": "#b3261e", "threshold": "#7a5400",
       "half_width": "#3d3d3d", "reference": "#6b6b6b"}
CATEGORY_SCHEME: Final = "tableau10"
MAX_HEATMAP_LABELS = 14  # cell values are printed up to this many benchmarks per side


def _finite(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing, NaN or infinite."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _data(rows: Sequence[Mapping[str, Any]]) -> alt.Data:
    return alt.Data(values=[dict(r) for r in rows])


def _percent(level: float) -> str:
    return f"{100 * level:g}%"


def _described(chart: Any, *, description: str) -> Any:
    return chart.properties(description=description)


def themed(chart: Any) -> Any:
    """One look for every chart (fonts, sizes, white background); applied once, at render time,
    so charts can still be combined (:func:`combine`) before."""
    return (
        chart.configure(font=FONT, background="white", padding=8)
        .configure_axis(labelFontSize=12, titleFontSize=13, titleFontWeight="normal", labelColor="#222",
                        titleColor="#111", gridColor="#e3e3e3", domainColor="#555", tickColor="#555")
        .configure_legend(labelFontSize=12, titleFontSize=12, titleFontWeight="normal", labelLimit=260,
                          orient="bottom", direction="horizontal", columns=3, symbolOpacity=1,
                          symbolStrokeWidth=2)
        .configure_title(fontSize=15, subtitleFontSize=12, subtitleColor="#333", anchor="start", color="#111")
        .configure_view(stroke="#c8c8c8")
    )


def _series_scale(domain: list[str], palette: Mapping[str, str]) -> alt.Scale:
    return alt.Scale(domain=domain, range=[palette[name] for name in domain])


def session_trajectory(rows: Sequence[Mapping[str, Any]], *, level: float = 0.95, true_score: float | None = None,
                       stop_half_width: float | None = None, score_title: str = "score",
                       score_range: tuple[float | None, float | None] | None = None,
                       title: str = "Estimate after each observation", band_name: str | None = None) -> Any:
    """Estimate and its interval band vs items observed (papers/004 §3), with the half-width panel.

    ``rows`` are trajectory rows ``{n, estimate, ci: [lo, hi]}``; ``band_name`` says what the band is (the
    session method's interval: ``evalplan.core.sequential.interval_names.interval_label``, e.g. "95% confidence
    sequence (anytime-valid)"; default "95% interval"). The lower panel draws the
    interval half-width and, when the session stops on precision, the ``stop_half_width``
    threshold; the upper one draws the model's true score when it is known. With a bounded
    ``score_range`` the score axis is that range and the band is drawn clipped to it.
    """
    flat: list[dict[str, Any]] = []
    for r in rows:
        ci = r.get("ci") or [None, None]
        lo, hi, estimate = _finite(ci[0]), _finite(ci[1]), _finite(r.get("estimate"))
        if estimate is None:
            continue
        flat.append({"n": int(r["n"]), "estimate": estimate, "lo": lo, "hi": hi,
                     "half_width": None if lo is None or hi is None else (hi - lo) / 2})
    band_name = band_name or f"{_percent(level)} interval"
    names = {"estimate": "estimate", "interval": band_name, "true": "true score",
             "half_width": "interval half-width", "threshold": "stop threshold"}
    domain = [names["estimate"], names["interval"]] + ([names["true"]] if _finite(true_score) is not None else [])
    domain += [names["half_width"]] + ([names["threshold"]] if _finite(stop_half_width) is not None else [])
    palette = {names[key]: ink for key, ink in INK.items() if key in names}
    color = alt.Color("series:N", scale=_series_scale(domain, palette), title=None)
    x = alt.X("n:Q", title="items observed (n)", scale=alt.Scale(domainMin=0, nice=True),
              axis=alt.Axis(tickMinStep=1, format="d"))
    lo_s, hi_s = score_range or (None, None)
    bounded = lo_s is not None and hi_s is not None
    y_scale = alt.Scale(domain=[lo_s, hi_s], clamp=True, nice=False) if bounded else alt.Scale(zero=False)
    base = alt.Chart(_data(flat))
    band = (base.transform_filter("isValid(datum.lo) && isValid(datum.hi)")
            .transform_calculate(series=f"'{band_name}'")
            .mark_area(opacity=0.45, interpolate="step-after" if len(flat) < 3 else "linear")
            .encode(x=x, y=alt.Y("lo:Q", title=score_title, scale=y_scale), y2="hi:Q", color=color)
            .properties(name="band"))
    line = (base.transform_calculate(series="'estimate'").mark_line(strokeWidth=2)
            .encode(x=x, y="estimate:Q", color=color).properties(name="estimate"))
    points = (base.transform_calculate(series="'estimate'").mark_point(filled=True, size=28, opacity=1)
              .encode(x=x, y="estimate:Q", color=color).properties(name="observation"))
    layers: list[Any] = [band, line, points]
    if _finite(true_score) is not None:
        layers.append(alt.Chart(_data([{"value": float(true_score), "series": names["true"]}]))  # type: ignore[arg-type]
                      .mark_rule(strokeDash=[6, 4], strokeWidth=2)
                      .encode(y="value:Q", color=color).properties(name="true_score"))
    upper = alt.layer(*layers).properties(width=WIDTH, height=HEIGHT)
    width_layers: list[Any] = [
        base.transform_filter("isValid(datum.half_width)").transform_calculate(series=f"'{names['half_width']}'")
        .mark_line(strokeWidth=2, interpolate="step-after")
        .encode(x=x, y=alt.Y("half_width:Q", title=f"half-width ({score_title} units)",
                             scale=alt.Scale(zero=True)), color=color)
        .properties(name="half_width")]
    if _finite(stop_half_width) is not None:
        width_layers.append(alt.Chart(_data([{"value": float(stop_half_width),  # type: ignore[arg-type]
                                              "series": names["threshold"]}]))
                            .mark_rule(strokeDash=[4, 3], strokeWidth=2)
                            .encode(y="value:Q", color=color).properties(name="stop_threshold"))
    lower = alt.layer(*width_layers).properties(width=WIDTH, height=110)
    subtitle = f"{len(flat)} observations; band = {band_name}"
    if _finite(stop_half_width) is not None:
        subtitle += f"; stops once the half-width is at most {float(stop_half_width):g}"  # type: ignore[arg-type]
    chart = (alt.vconcat(upper, lower, spacing=14)
             .resolve_scale(color="shared", x="shared")
             .properties(title=alt.Title(title, subtitle=subtitle)))
    return _described(chart, description=f"{title}: {subtitle}")


def coreset_composition(rows: Sequence[Mapping[str, Any]], *, title: str = "Coreset composition") -> Any:
    """Items per benchmark (bars coloured by capability) and per capability.

    ``rows``: ``{benchmark, capability, selected, total}``; ``total`` is the benchmark's size.
    """
    flat: list[dict[str, Any]] = [{"benchmark": str(r["benchmark"]), "capability": str(r.get("capability") or "(none)"),
             "selected": int(r["selected"]), "total": int(r.get("total") or 0)} for r in rows]
    capability = alt.Color("capability:N", title="capability", scale=alt.Scale(scheme=CATEGORY_SCHEME))
    base = alt.Chart(_data(flat))
    y = alt.Y("benchmark:N", title="benchmark", sort="-x", axis=alt.Axis(labelLimit=220))
    bars = (base.mark_bar().encode(x=alt.X("selected:Q", title="items in the coreset"), y=y, color=capability)
            .properties(name="benchmark_bars"))
    labels = (base.transform_calculate(label="datum.total > 0 ? datum.selected + ' of ' + datum.total + ' ('"
                                             " + format(datum.selected / datum.total, '.1%') + ')' : datum.selected")
              .mark_text(align="left", dx=4, fontSize=11, color="#222")
              .encode(x="selected:Q", y=y, text="label:N"))
    by_benchmark = alt.layer(bars, labels).properties(width=WIDTH - 120, height=max(60, 26 * len(flat)),
                                                      title="by benchmark")
    by_capability = (base.mark_bar().encode(
        x=alt.X("sum(selected):Q", title="items in the coreset"),
        y=alt.Y("capability:N", title="capability", sort="-x", axis=alt.Axis(labelLimit=220)),
        color=capability).properties(width=WIDTH - 120, height=max(40, 26 * len({f["capability"] for f in flat})),
                                     title="by capability", name="capability_bars"))
    total = sum(f["selected"] for f in flat)
    chart = (alt.vconcat(by_benchmark, by_capability, spacing=18)
             .resolve_scale(color="shared")
             .properties(title=alt.Title(title, subtitle=f"{total} items over {len(flat)} benchmarks")))
    return _described(chart, description=f"{title}: {total} items over {len(flat)} benchmarks")


def gain_curve(rows: Sequence[Mapping[str, Any]], *, objective: str = "facility-location objective",
               title: str = "Greedy gain curve") -> Any:
    """Marginal gain of each greedy pick and the running share of the final objective (papers/000 §3).

    ``rows``: ``{benchmark, rank, gain}`` with ``rank`` the coreset's 1-based pick order; the running
    share is per benchmark (a multi-benchmark greedy interleaves its benchmarks' picks).
    """
    flat: list[dict[str, Any]] = [{"benchmark": str(r["benchmark"]), "pick": int(r["rank"]), "gain": g}
            for r in rows if (g := _finite(r.get("gain"))) is not None]
    color = alt.Color("benchmark:N", title="benchmark", scale=alt.Scale(scheme=CATEGORY_SCHEME))
    x = alt.X("pick:Q", title="items selected (greedy order)", axis=alt.Axis(tickMinStep=1, format="d"))
    base = alt.Chart(_data(flat))
    marginal = (base.mark_line(point=alt.OverlayMarkDef(size=16, filled=True)).encode(
        x=x, y=alt.Y("gain:Q", title=f"marginal gain ({objective})"), color=color)
        .properties(width=WIDTH, height=200, name="marginal_gain"))
    cumulative = (base.transform_window(cumulative="sum(gain)", sort=[alt.SortField("pick")], groupby=["benchmark"])
                  .transform_joinaggregate(final="sum(gain)", groupby=["benchmark"])
                  .transform_calculate(share="datum.final > 0 ? datum.cumulative / datum.final : 0")
                  .mark_line(strokeWidth=2)
                  .encode(x=x, y=alt.Y("share:Q", title="share of the final objective",
                                       axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])), color=color)
                  .properties(width=WIDTH, height=150, name="cumulative_share"))
    chart = (alt.vconcat(marginal, cumulative, spacing=14).resolve_scale(color="shared", x="shared")
             .properties(title=alt.Title(title, subtitle="diminishing returns: each pick adds less coverage")))
    return _described(chart, description=f"{title} over {len(flat)} picks")


def predicted_vs_true(rows: Sequence[Mapping[str, Any]], *, level: float = 0.95, score_title: str = "score",
                      title: str = "Reference models: predicted vs true") -> Any:
    """Predicted vs true scores with their intervals, one point per (model, benchmark), and y = x.

    ``rows``: ``{model, benchmark, predicted, lo?, hi?, true}``.
    """
    flat: list[dict[str, Any]] = []
    for r in rows:
        predicted, true = _finite(r.get("predicted")), _finite(r.get("true"))
        if predicted is None or true is None:
            continue
        flat.append({"model": str(r["model"]), "benchmark": str(r["benchmark"]), "predicted": predicted,
                     "true": true, "lo": _finite(r.get("lo")), "hi": _finite(r.get("hi"))})
    values: list[float] = [v for f in flat for v in (f["predicted"], f["true"], f["lo"], f["hi"]) if v is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    pad = 0.03 * (hi - lo or 1.0)
    domain = [lo - pad, hi + pad]
    color = alt.Color("benchmark:N", title="benchmark", scale=alt.Scale(scheme=CATEGORY_SCHEME))
    x = alt.X("true:Q", title=f"true {score_title}", scale=alt.Scale(domain=domain, nice=False))
    y = alt.Y("predicted:Q", title=f"predicted {score_title}", scale=alt.Scale(domain=domain, nice=False))
    base = alt.Chart(_data(flat))
    diagonal = (alt.Chart(_data([{"v": domain[0]}, {"v": domain[1]}]))
                .mark_line(strokeDash=[5, 4], color=INK["reference"], strokeWidth=1.5)
                .encode(x=alt.X("v:Q", scale=alt.Scale(domain=domain, nice=False)),
                        y=alt.Y("v:Q", scale=alt.Scale(domain=domain, nice=False))).properties(name="diagonal"))
    bars = (base.transform_filter("isValid(datum.lo) && isValid(datum.hi)")
            .mark_rule(strokeWidth=1.5, opacity=0.45)
            .encode(x=x, y=alt.Y("lo:Q", scale=alt.Scale(domain=domain, nice=False)), y2="hi:Q", color=color)
            .properties(name="interval"))
    points = (base.mark_point(filled=True, size=40, opacity=1).encode(x=x, y=y, color=color)
              .properties(name="model"))
    side = min(WIDTH, 420)
    subtitle = f"{len(flat)} model-benchmark pairs; bars = {_percent(level)} intervals; dashed line: y = x"
    chart = alt.layer(diagonal, bars, points).properties(width=side, height=side,
                                                         title=alt.Title(title, subtitle=subtitle))
    return _described(chart, description=f"{title}: {subtitle}")


def backtest_curves(rows: Sequence[Mapping[str, Any]], *, level: float = 0.95, score_title: str = "score",
                    title: str = "Backtest: error and coverage vs budget") -> Any:
    """RMSE and interval coverage vs budget, one line per method (mean over seeds, ±1 s.e.).

    ``rows`` are backtest rows (papers/002 §3): ``{benchmark, label, budget, seed, rmse, coverage}``;
    a null ``coverage`` (predictors without intervals) is left out of the coverage panel.
    """
    flat: list[dict[str, Any]] = [
        {"benchmark": str(r.get("benchmark") or ""), "method": str(r.get("label") or r.get("method")),
         "budget": _finite(r.get("budget")), "rmse": _finite(r.get("rmse")), "coverage": _finite(r.get("coverage"))}
        for r in rows]
    flat = [f for f in flat if f["budget"] is not None]
    color = alt.Color("method:N", title="method", scale=alt.Scale(scheme=CATEGORY_SCHEME))
    x = alt.X("budget:Q", title="budget (share of items)", axis=alt.Axis(format="%"))
    panels = []
    benchmarks = sorted({f["benchmark"] for f in flat})
    for benchmark in benchmarks or [""]:
        base = alt.Chart(_data([f for f in flat if f["benchmark"] == benchmark]))
        rmse_base = base.transform_filter("isValid(datum.rmse)")
        rmse = alt.layer(
            rmse_base.mark_line(point=alt.OverlayMarkDef(size=30, filled=True))
            .encode(x=x, y=alt.Y("mean(rmse):Q", title=f"RMSE ({score_title} units)", scale=alt.Scale(zero=True)),
                    color=color).properties(name="rmse"),
            rmse_base.mark_errorbar(extent="stderr").encode(x=x, y=alt.Y("rmse:Q", title=""), color=color),
        ).properties(width=WIDTH // 2 + 20, height=220, title=f"{benchmark}: RMSE" if benchmark else "RMSE")
        coverage_base = base.transform_filter("isValid(datum.coverage)")
        coverage = alt.layer(
            coverage_base.mark_line(point=alt.OverlayMarkDef(size=30, filled=True))
            .encode(x=x, y=alt.Y("mean(coverage):Q", title="interval coverage",
                                 axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
                    color=color).properties(name="coverage"),
            alt.Chart(_data([{"value": level}])).mark_rule(strokeDash=[5, 4], color=INK["threshold"], strokeWidth=2)
            .encode(y="value:Q").properties(name="nominal_level"),
        ).properties(width=WIDTH // 2 + 20, height=220,
                     title=(f"{benchmark}: " if benchmark else "") + f"coverage (dashed: nominal {_percent(level)})")
        panels.append(alt.hconcat(rmse, coverage, spacing=24))
    chart = (alt.vconcat(*panels, spacing=24).resolve_scale(color="shared")
             .properties(title=alt.Title(title, subtitle="mean over seeds; error bars ±1 standard error")))
    return _described(chart, description=f"{title} for {len(benchmarks)} benchmark(s)")


def plan_curves(plans: Mapping[str, Mapping[str, Any]], *, title: str = "Budget plan: interval half-width vs budget"
                ) -> Any:
    """Per benchmark, the planned interval half-width of every candidate at every budget tried (one line per
    method), the requested half-width (dashed) and the chosen point (a large mark, named ``chosen``).

    ``plans`` maps a benchmark name to its plan (``evalplan.core.backtest.planner.plan_benchmark``): ``evidence``
    rows ``{label, fraction, half_width, expected_rmse}``, ``requested_half_width``, ``fraction``, ``label``.
    """
    panels = []
    for name, plan in plans.items():
        rows = [{"method": str(r.get("label") or r.get("method")), "budget": _finite(r.get("fraction")),
                 "half_width": _finite(r.get("half_width")), "rmse": _finite(r.get("expected_rmse"))}
                for r in plan.get("evidence") or []]
        rows = [r for r in rows if r["budget"] is not None and r["half_width"] is not None]
        x = alt.X("budget:Q", title="budget (share of items)", axis=alt.Axis(format="%"))
        y = alt.Y("half_width:Q", title="interval half-width (score units)", scale=alt.Scale(zero=True))
        color = alt.Color("method:N", title="method", scale=alt.Scale(scheme=CATEGORY_SCHEME))
        lines = (alt.Chart(_data(rows)).mark_line(point=alt.OverlayMarkDef(size=40, filled=True))
                 .encode(x=x, y=y, color=color, order="budget:Q",
                         tooltip=["method:N", alt.Tooltip("budget:Q", format=".1%"),
                                  alt.Tooltip("half_width:Q", format=".4f"), alt.Tooltip("rmse:Q", format=".4f")])
                 .properties(name="curve"))
        target = (alt.Chart(_data([{"value": _finite(plan.get("requested_half_width"))}]))
                  .mark_rule(strokeDash=[5, 4], color=INK["threshold"], strokeWidth=2).encode(y="value:Q")
                  .properties(name="requested"))
        chosen = [{"budget": _finite(plan.get("fraction")), "half_width": _finite(plan.get("half_width")),
                   "method": str(plan.get("label"))}]
        point = (alt.Chart(_data(chosen)).mark_point(shape="diamond", size=260, filled=True, color=INK["true"])
                 .encode(x=x, y=y, tooltip=["method:N", alt.Tooltip("budget:Q", format=".1%")])
                 .properties(name="chosen"))
        share = 100 * float(plan.get("fraction") or 0.0)
        panels.append(alt.layer(lines, target, point).properties(
            width=WIDTH, height=HEIGHT, title=f"{name}: chosen {plan.get('label')} at {share:.1f}%"))
    chart = (alt.vconcat(*panels, spacing=24) if panels else alt.Chart(_data([])).mark_point()).properties(
        title=alt.Title(title, subtitle="dashed: requested half-width; diamond: the plan"))
    return _described(chart, description=f"{title} for {len(panels)} benchmark(s)")


def similarity_heatmap(names: Sequence[str], matrix: Sequence[Sequence[float | None]], *,
                       value_title: str = "similarity", title: str = "Benchmark similarity") -> Any:
    """A square heatmap in the given order (e.g. a clustering order), values printed when it is small.

    ``matrix[i][j]`` is the similarity of ``names[i]`` and ``names[j]``; None is a missing cell.
    """
    order = [str(n) for n in names]
    cells: list[dict[str, Any]] = [{"row": order[i], "column": order[j], "value": _finite(v)}
             for i, line in enumerate(matrix) for j, v in enumerate(line)]
    values: list[float] = [c["value"] for c in cells if c["value"] is not None]
    diverging = bool(values) and min(values) < 0
    scale = (alt.Scale(scheme="blueorange", domain=[-1, 1], reverse=True) if diverging
             else alt.Scale(scheme="blues", domain=[min(values + [0.0]), max(values + [1.0])]))
    side = max(160, min(WIDTH, 34 * len(order)))
    base = alt.Chart(_data(cells))
    x = alt.X("column:N", sort=order, title=None, axis=alt.Axis(labelAngle=-40, labelLimit=160))
    y = alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=160))
    rects = (base.mark_rect(stroke="white", strokeWidth=1)
             .encode(x=x, y=y, color=alt.Color("value:Q", title=value_title, scale=scale,
                                               legend=alt.Legend(orient="right", direction="vertical")))
             .properties(name="cell"))
    layers: list[Any] = [rects]
    if len(order) <= MAX_HEATMAP_LABELS:
        threshold = 0.55 if not diverging else 0.6
        layers.append(base.transform_filter("isValid(datum.value)").mark_text(fontSize=10).encode(
            x=x, y=y, text=alt.Text("value:Q", format=".2f"),
            color=alt.condition(f"abs(datum.value) > {threshold}", alt.value("white"), alt.value("#111"))))
    chart = alt.layer(*layers).properties(width=side, height=side, title=alt.Title(
        title, subtitle=f"{len(order)} benchmarks, in the order shown"))
    return _described(chart, description=f"{title} of {len(order)} benchmarks")


def histogram(values: Sequence[float | None], *, x_title: str, count_title: str, title: str,
              maxbins: int = 30, x_format: str | None = None) -> Any:
    """A histogram of ``values`` (missing values dropped), e.g. model means or item difficulties."""
    flat = [{"value": v} for x in values if (v := _finite(x)) is not None]
    axis = alt.Axis(format=x_format) if x_format else alt.Axis()
    chart = (alt.Chart(_data(flat)).mark_bar(color=INK["estimate"], stroke="white", strokeWidth=0.5)
             .encode(x=alt.X("value:Q", bin=alt.Bin(maxbins=maxbins), title=x_title, axis=axis),
                     y=alt.Y("count():Q", title=count_title))
             .properties(width=WIDTH - 100, height=200, name="histogram",
                         title=alt.Title(title, subtitle=f"{len(flat)} values")))
    return _described(chart, description=f"{title}: histogram of {len(flat)} values")


def combine(*charts: Any, title: str | None = None) -> Any:
    """Charts stacked into one figure (e.g. a coreset's composition over its quality chart)."""
    figure = alt.vconcat(*charts, spacing=36).resolve_scale(color="independent")
    return figure.properties(title=title) if title else figure


def sessions_side_by_side(rows: Sequence[Mapping[str, Any]], *, level: float = 0.95, score_title: str = "score",
                          score_range: tuple[float | None, float | None] | None = None,
                          title: str = "Estimates after each observation") -> Any:
    """Several sessions' estimates and intervals vs items observed, a colour per session.

    ``rows``: ``{session, n, estimate, ci: [lo, hi]}`` (``session`` is its label in the legend)."""
    flat = []
    for r in rows:
        ci = r.get("ci") or [None, None]
        estimate = _finite(r.get("estimate"))
        if estimate is not None:
            flat.append({"session": str(r["session"]), "n": int(r["n"]), "estimate": estimate,
                         "lo": _finite(ci[0]), "hi": _finite(ci[1])})
    color = alt.Color("session:N", scale=alt.Scale(scheme=CATEGORY_SCHEME), title="session")
    x = alt.X("n:Q", title="items observed (n)", scale=alt.Scale(domainMin=0, nice=True),
              axis=alt.Axis(tickMinStep=1, format="d"))
    lo_s, hi_s = score_range or (None, None)
    bounded = lo_s is not None and hi_s is not None
    y_scale = alt.Scale(domain=[lo_s, hi_s], clamp=True, nice=False) if bounded else alt.Scale(zero=False)
    base = alt.Chart(_data(flat))
    band = (base.transform_filter("isValid(datum.lo) && isValid(datum.hi)").mark_area(opacity=0.22)
            .encode(x=x, y=alt.Y("lo:Q", title=score_title, scale=y_scale), y2="hi:Q", color=color)
            .properties(name="band"))
    line = base.mark_line(strokeWidth=2).encode(x=x, y="estimate:Q", color=color).properties(name="estimate")
    subtitle = f"{len({r['session'] for r in flat})} sessions; bands = {_percent(level)} intervals"
    chart = (alt.layer(band, line).properties(width=WIDTH, height=HEIGHT)
             .properties(title=alt.Title(title, subtitle=subtitle)))
    return _described(chart, description=f"{title}: {subtitle}")


def paired_difference(rows: Sequence[Mapping[str, Any]], *, level: float = 0.95,
                      fixed: tuple[float, float] | None = None, difference: float | None = None,
                      title: str = "B - A on the items both observed") -> Any:
    """The anytime-valid confidence sequence on a paired difference vs common items, with zero
    (no difference) and, when given, the fixed-n interval and the mean difference at the last n.

    ``rows``: ``{n, interval: [lo, hi]}``."""
    flat = [{"n": int(r["n"]), "lo": _finite(r["interval"][0]), "hi": _finite(r["interval"][1])} for r in rows]
    last = int(rows[-1]["n"]) if flat else 0
    # the fixed-n interval and the mean at the last n sit just right of the sequence, where they can be seen
    beside = last + max(1, round(0.04 * last))
    x = alt.X("n:Q", title="common items (n)", scale=alt.Scale(domain=[0, beside + max(1, round(0.02 * last))]),
              axis=alt.Axis(tickMinStep=1, format="d"))
    names = {"cs": f"anytime {_percent(level)} confidence sequence",
             "fixed": f"fixed-n {_percent(level)} interval at n = {last}",
             "zero": "no difference", "mean": f"mean difference at n = {last}"}
    drawn_fixed = fixed is not None and bool(flat)
    domain = [names["cs"], names["zero"]] + ([names["fixed"]] if drawn_fixed else []) \
        + ([names["mean"]] if drawn_fixed and _finite(difference) is not None else [])
    palette = {names["cs"]: INK["interval"], names["zero"]: INK["reference"], names["fixed"]: INK["threshold"],
               names["mean"]: INK["estimate"]}
    color = alt.Color("series:N", scale=_series_scale(domain, palette), title=None)
    base = alt.Chart(_data(flat))
    layers: list[Any] = [
        base.transform_calculate(series=f"'{names['cs']}'").mark_area(opacity=0.6, interpolate="step-after")
        .encode(x=x, y=alt.Y("lo:Q", title="difference B - A (score units)"), y2="hi:Q", color=color)
        .properties(name="sequence"),
        alt.Chart(_data([{"value": 0.0, "series": names["zero"]}])).mark_rule(strokeDash=[4, 3], strokeWidth=1.5)
        .encode(y="value:Q", color=color).properties(name="zero")]
    if drawn_fixed:
        assert fixed is not None
        layers.append(alt.Chart(_data([{"n": beside, "lo": fixed[0], "hi": fixed[1], "series": names["fixed"]}]))
                      .mark_rule(strokeWidth=4).encode(x=x, y="lo:Q", y2="hi:Q", color=color)
                      .properties(name="fixed_interval"))
        if _finite(difference) is not None:
            layers.append(alt.Chart(_data([{"n": beside, "value": difference, "series": names["mean"]}]))
                          .mark_point(filled=True, size=60).encode(x=x, y="value:Q", color=color)
                          .properties(name="mean_difference"))
    subtitle = f"{len(flat)} common items; the sequence holds at every n at once"
    if drawn_fixed:
        subtitle += f"; right of it: the fixed-n interval at n = {last}"
    chart = alt.layer(*layers).properties(width=WIDTH, height=220, title=alt.Title(title, subtitle=subtitle))
    return _described(chart, description=f"{title}: {subtitle}")
