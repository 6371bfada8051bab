"""Stored bench pieces: one JSON file per (data set, regime) in a store folder, written as a piece finishes
so that a long bench resumes where it stopped."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalplan.core.backtest.sequential_backtest import REGIMES


def piece_path(store: Path, dataset: str, regime: str) -> Path:
    return store / f"{dataset}__{regime}.json"


def load_pieces(store: Path, datasets: Sequence[str], regimes: Sequence[str] = REGIMES) -> list[dict[str, Any]]:
    """The stored pieces of ``datasets`` x ``regimes`` that exist, in that order."""
    return [json.loads(path.read_text()) for name in datasets for regime in regimes
            if (path := piece_path(store, name, regime)).exists()]
