"""Read Vega's SVG output back: the marks of a named layer, and an area band's width along x."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

SVG_NS = "{http://www.w3.org/2000/svg}"
_NUMBER = r"-?\d+(?:\.\d+)?(?:e-?\d+)?"
_POINT = re.compile(rf"({_NUMBER}),({_NUMBER})")


def mark_items(svg: str, name: str) -> list[ET.Element]:
    """The drawn items (``path``/``line``/``rect``/...) of the mark layers named ``name``, over
    every panel (Vega-Lite appends ``_<i>`` to names inside a concatenation) and every series (a
    coloured line is one group per colour)."""
    wanted = re.compile(rf"^{re.escape(name)}(?:_\d+)?_marks$")
    root = ET.fromstring(svg)
    return [child for group in root.iter(f"{SVG_NS}g")
            if any(wanted.match(c) for c in (group.get("class") or "").split())
            for child in group if child.tag != f"{SVG_NS}g"]


def band_widths(path: str) -> list[tuple[float, float]]:
    """``(x, width)`` along an area path: Vega draws the upper edge left to right, then the lower
    edge back, so every x appears twice; the width is the distance between its two y's."""
    ys: dict[float, list[float]] = {}
    for x, y in _POINT.findall(path):
        ys.setdefault(round(float(x), 2), []).append(float(y))
    return sorted((x, abs(v[0] - v[-1])) for x, v in ys.items() if len(v) >= 2)


def texts(svg: str) -> list[str]:
    """Every text in the SVG (axis titles, labels, legend entries, titles)."""
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG_NS}text")]
