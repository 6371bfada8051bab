"""Render charts offline with vl-convert (Vega + Vega-Lite compiled into the wheel; no network).

Rendering costs ~0.1-0.3 s per chart after a one-off ~1.5 s warm-up, so identical specs are
cached (a finished coreset's chart never changes; a session's changes with every observation).
"""

from __future__ import annotations

import html
import json
import re
from functools import lru_cache
from typing import Any

import vl_convert

from evalplan.charts.specs import themed

CACHE_SIZE = 128
_ID = re.compile(r'\bid="([^"]+)"')


def spec_of(chart: Any) -> dict[str, Any]:
    """The themed Vega-Lite spec (a plain dict) of an altair chart; a dict passes through."""
    return chart if isinstance(chart, dict) else themed(chart).to_dict()


def _key(chart: Any) -> str:
    return json.dumps(spec_of(chart), sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=CACHE_SIZE)
def _svg(spec_json: str) -> str:
    return str(vl_convert.vegalite_to_svg(json.loads(spec_json)))


@lru_cache(maxsize=CACHE_SIZE // 4)
def _png(spec_json: str, scale: float) -> bytes:
    return bytes(vl_convert.vegalite_to_png(json.loads(spec_json), scale=scale))


def to_svg(chart: Any) -> str:
    """A standalone SVG document (``image/svg+xml``)."""
    return _svg(_key(chart))


def to_png(chart: Any, *, scale: float = 2.0) -> bytes:
    """A PNG at ``scale`` x the chart's CSS size."""
    return _png(_key(chart), scale)


def to_inline_svg(chart: Any, *, label: str, prefix: str) -> str:
    """SVG markup to place inside an HTML page.

    ``prefix`` namespaces the SVG's element ids (several charts on one page must not share
    clip-path or gradient ids); ``label`` becomes the accessible name (``role="img"`` +
    ``<title>``). The chart's description is kept as ``aria-description``.
    """
    svg = to_svg(chart)
    ids = set(_ID.findall(svg))
    for old in ids:
        new = f"{prefix}-{old}"
        svg = svg.replace(f'id="{old}"', f'id="{new}"').replace(f"url(#{old})", f"url(#{new})")
        svg = svg.replace(f'href="#{old}"', f'href="#{new}"')
    description = spec_of(chart).get("description") or label
    opening = (f'<svg role="img" aria-label="{html.escape(label, quote=True)}" '
               f'aria-description="{html.escape(str(description), quote=True)}" data-chart="{prefix}" ')
    svg = svg.replace("<svg ", opening, 1)
    close = svg.index(">") + 1
    return svg[:close] + f"<title>{html.escape(label)}</title>" + svg[close:]
