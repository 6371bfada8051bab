"""Coreset budgets over several benchmarks: a total count or a fraction of each benchmark."""

from __future__ import annotations

import numpy as np


def proportional_counts(sizes: list[int], total: int, minimum: int = 1) -> list[int]:
    """Split ``total`` over benchmarks in proportion to their sizes (largest remainder),
    giving each at least ``minimum`` and never more than its size."""
    sizes_arr = np.asarray(sizes, dtype=np.int64)
    if total > int(sizes_arr.sum()):
        raise ValueError(f"budget {total} exceeds the {int(sizes_arr.sum())} available items")
    if total < minimum * len(sizes):
        raise ValueError(f"budget {total} is smaller than {minimum} per benchmark x {len(sizes)} benchmarks")
    counts = np.minimum(sizes_arr, minimum)
    remaining = total - int(counts.sum())
    while remaining > 0:
        room = sizes_arr - counts
        share = room / room.sum() * remaining
        add = np.minimum(np.floor(share).astype(np.int64), room)
        if add.sum() == 0:  # hand out single items by largest remainder
            order = np.argsort(-(share - np.floor(share)) - (room > 0) * 1e-9, kind="stable")
            for j in order:
                if remaining == 0:
                    break
                if room[j] > 0:
                    counts[j] += 1
                    remaining -= 1
            continue
        counts += add
        remaining -= int(add.sum())
    return [int(c) for c in counts]


def fraction_counts(sizes: list[int], fraction: float) -> list[int]:
    """``fraction`` of each benchmark, rounded, at least one item each."""
    if not 0 < fraction <= 1:
        raise ValueError("fraction must be in (0, 1]")
    return [max(1, min(n, int(round(fraction * n)))) if n else 0 for n in sizes]
