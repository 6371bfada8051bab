"""Chart downloads over HTTP: ``plot.svg`` (image/svg+xml) and ``plot.png``."""

from __future__ import annotations

from typing import Any, Literal

from starlette.responses import Response

from evalplan.charts.render import to_png, to_svg

MEDIA_TYPES = {"svg": "image/svg+xml", "png": "image/png"}


def chart_response(chart: Any, fmt: Literal["svg", "png"], stem: str) -> Response:
    """The chart as a file named ``<stem>.<fmt>`` (shown inline by browsers, saved under that name)."""
    body: str | bytes = to_svg(chart) if fmt == "svg" else to_png(chart)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)
    return Response(body, media_type=MEDIA_TYPES[fmt],
                    headers={"Content-Disposition": f'inline; filename="{safe}.{fmt}"', "Cache-Control": "no-store"})
