"""Summaries the benches share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentile(values: Sequence[float] | np.ndarray, q: float, scale: float = 1.0) -> float:
    """The ``q``-th percentile (numpy's linear interpolation) of ``values`` times ``scale``; NaN when empty."""
    array = np.asarray(values, dtype=float)
    return float(np.percentile(array * scale, q)) if array.size else float("nan")
