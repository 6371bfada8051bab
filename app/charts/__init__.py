"""Charts: pure functions from plain rows to Vega-Lite specs (altair), rendered offline to SVG/PNG.

``app.charts.specs`` builds the charts; ``app.charts.render`` turns a chart into SVG or PNG with
``vl-convert`` (an embedded Vega runtime: nothing is fetched at run time). The pages and the
``plot.svg`` routes both call these functions, so a page shows exactly the downloadable chart.
"""

from app.charts.render import to_inline_svg, to_png, to_svg
from app.charts.specs import (
    backtest_curves,
    combine,
    coreset_composition,
    gain_curve,
    histogram,
    predicted_vs_true,
    session_trajectory,
    similarity_heatmap,
)

__all__ = [
    "backtest_curves",
    "combine",
    "coreset_composition",
    "gain_curve",
    "histogram",
    "predicted_vs_true",
    "session_trajectory",
    "similarity_heatmap",
    "to_inline_svg",
    "to_png",
    "to_svg",
]
