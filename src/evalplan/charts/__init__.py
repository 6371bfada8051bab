"""Charts: pure functions from plain rows to Vega-Lite specs (altair), rendered offline to SVG/PNG.

``evalplan.charts.specs`` builds the charts; ``evalplan.charts.render`` turns a chart into SVG or PNG with
``vl-convert`` (an embedded Vega runtime: nothing is fetched at run time). The pages and the
``plot.svg`` routes both call these functions, so a page shows exactly the downloadable chart.
"""

from evalplan.charts.render import to_inline_svg, to_png, to_svg
from evalplan.charts.specs import (
    backtest_curves,
    combine,
    coreset_composition,
    gain_curve,
    histogram,
    paired_difference,
    plan_curves,
    predicted_vs_true,
    session_trajectory,
    sessions_side_by_side,
    similarity_heatmap,
)

__all__ = [
    "backtest_curves",
    "combine",
    "coreset_composition",
    "gain_curve",
    "histogram",
    "plan_curves",
    "paired_difference",
    "predicted_vs_true",
    "session_trajectory",
    "sessions_side_by_side",
    "similarity_heatmap",
    "to_inline_svg",
    "to_png",
    "to_svg",
]
