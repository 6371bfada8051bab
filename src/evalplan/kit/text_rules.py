"""Which characters text may hold: the one rule for names, free text and what charts are given (issue 32
items 1 and 8; docs/SECURITY.md "Names and text").

* **Free text** (every string of a request: JSON bodies and keys, query, path and form values, JSON
  uploads): no C0 control character other than TAB, LF and CR (U+0001-U+0008, U+000B, U+000C,
  U+000E-U+001F; NUL is refused on its own, ``evalplan.kit.input_guard``). They are not text: XML and SVG
  cannot hold them, terminals act on them, and the chart renderer (vl-convert) aborts its whole process on
  one. DEL and the C1 controls stay allowed in free text (Windows-1252 mojibake in real prompts holds
  them); names refuse them.
* **Names** (benchmarks, models, teams, coresets, item ids, session targets): no character of the Unicode
  categories Cc (controls, DEL and C1 included), Cf (bidi overrides and isolates, zero-width characters,
  BOM), Cs (surrogates), Zl or Zp (line and paragraph separators): such a name displays as something else
  than it is.
* **Rendering**: ``evalplan.charts.safe_text.displayable`` (in the charts layer, which the renderer may import)
  replaces what no renderer may receive by a visible stand-in, so text stored before these rules is shown,
  never executed.
"""

from __future__ import annotations

import unicodedata

#: the C0 controls free text may hold
ALLOWED_CONTROLS = frozenset("\t\n\r")
#: the C0 controls no text may hold (NUL has its own message in ``input_guard``)
REFUSED_CONTROLS = frozenset(chr(c) for c in range(1, 0x20)) - ALLOWED_CONTROLS

NAME_REFUSED_CATEGORIES = {"Cc": "control", "Cf": "format (bidi or zero-width)", "Cs": "surrogate",
                           "Zl": "line separator", "Zp": "paragraph separator"}


def describe(ch: str) -> str:
    """``U+001C (INFORMATION SEPARATOR FOUR)``."""
    return f"U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed control')})"


def free_text_problem(text: str) -> str | None:
    """Why ``text`` cannot be free text (a refused C0 control character, located by position), or None."""
    if not REFUSED_CONTROLS.isdisjoint(text):
        at, ch = next((i, c) for i, c in enumerate(text) if c in REFUSED_CONTROLS)
        return (f"contains {describe(ch)} at character {at}, a control character "
                "(text may hold tab, line feed and carriage return, no other control character)")
    return None


def name_char_problem(name: str) -> str | None:
    """Why ``name`` cannot be a name on its characters alone (the first refused one), or None."""
    for ch in name:
        category = unicodedata.category(ch)
        if category in NAME_REFUSED_CATEGORIES:
            return f"contains {describe(ch)}, a {NAME_REFUSED_CATEGORIES[category]} character"
    return None


__all__ = ["ALLOWED_CONTROLS", "NAME_REFUSED_CATEGORIES", "REFUSED_CONTROLS", "describe", "free_text_problem",
           "name_char_problem"]
