"""CSV formula injection (OWASP "CSV Injection"): a text cell that a spreadsheet would evaluate as a
formula is written with a leading single quote, and read back without it.

Every ``text/csv`` export writes its text cells (names, item ids) through :func:`neutralise`; the wide
score CSV parser reads header and model cells through :func:`restore`, so an export uploaded again
gives back the original names. Numbers (scores, ranks, weights) are written as they are: a negative
number is data, not a formula.
"""

from __future__ import annotations

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(cell: str) -> str:
    """``cell`` with a ``'`` in front when it starts with ``= + - @``, tab or carriage return (after any
    quotes it already starts with, so that a name like ``'=x`` also comes back exactly)."""
    return "'" + cell if cell.lstrip("'").startswith(FORMULA_START) else cell


def restore(cell: str) -> str:
    """The inverse of :func:`neutralise` (a ``'`` followed by a formula start loses the quote)."""
    return cell[1:] if cell.startswith("'") and cell.lstrip("'").startswith(FORMULA_START) else cell
