"""Coreset budgets given as a fraction of each benchmark (a total count is split by the methods;
see ``evalplan.core.selection.baselines.stratified_counts`` for the proportional split)."""

from __future__ import annotations


def fraction_counts(sizes: list[int], fraction: float) -> list[int]:
    """``fraction`` of each benchmark, rounded, at least one item each."""
    if not 0 < fraction <= 1:
        raise ValueError("fraction must be in (0, 1]")
    return [max(1, min(n, int(round(fraction * n)))) if n else 0 for n in sizes]
