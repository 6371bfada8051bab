"""The declared scale of a benchmark's scores: binary {0, 1} or continuous within bounds."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ScoreScale:
    kind: str = "continuous"  # "binary" | "continuous"
    minimum: float | None = 0.0
    maximum: float | None = 1.0

    def problem(self, value: float) -> str | None:
        """Return why ``value`` is not a valid score on this scale, or None if it is."""
        if math.isnan(value) or math.isinf(value):
            return f"score must be a finite number, got {value!r}"
        if self.kind == "binary":
            if value not in (0.0, 1.0):
                return f"score must be 0 or 1 for a binary benchmark, got {value!r}"
            return None
        if self.minimum is not None and value < self.minimum:
            return f"score {value!r} is below the benchmark's minimum {self.minimum!r}"
        if self.maximum is not None and value > self.maximum:
            return f"score {value!r} is above the benchmark's maximum {self.maximum!r}"
        return None


def parse_score(text: str) -> float:
    """Parse a score cell; raises ValueError with a readable message."""
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"score must be a number, got {text!r}") from None
