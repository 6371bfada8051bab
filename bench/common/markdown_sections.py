"""Writing a bench script's section into a markdown results file (docs/RESULTS.md, docs/PERFORMANCE.md)."""

from __future__ import annotations

from pathlib import Path

INTERPRETATION = ("<!-- interpretation -->", "<!-- /interpretation -->")


def write_section(path: Path, section: str, start: str, end: str, new_file: str = "# Results\n") -> None:
    """Replace what lies between the markers ``start`` and ``end`` (inclusive) by ``section``, or
    append it when the markers are absent (a missing file starts as ``new_file``). A hand-written
    interpretation already there (between :data:`INTERPRETATION` markers) replaces the empty pair
    that ``section`` carries. ``start`` may be a marker's prefix (``"<!-- figures"``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text() if path.exists() else new_file
    i, j = text.find(start), text.find(end)
    if i == -1 or j == -1 or j < i:
        path.write_text(text.rstrip("\n") + "\n\n" + section + "\n")
        return
    old = text[i:j]
    a, b = old.find(INTERPRETATION[0]), old.find(INTERPRETATION[1])
    if a != -1 and b != -1:
        section = section.replace(INTERPRETATION[0] + "\n" + INTERPRETATION[1], old[a:b + len(INTERPRETATION[1])])
    path.write_text(text[:i] + section + text[j + len(end):])
