"""The shared data sets (``../shared/data``, or ``$EVALPLAN_DATA_DIR``) as the benches read them in place."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from evalplan.benchmarks.score_formats import parse_wide_csv
from evalplan.core.backtest.backtest import impute_item_mean
from evalplan.core.benchmarks.score_scale import ScoreScale

ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """The shared data folder: ``$EVALPLAN_DATA_DIR``, else ``shared/data`` next to the checkout."""
    return Path(os.environ.get("EVALPLAN_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


def load_scores(name: str) -> np.ndarray:
    """Data set ``name``'s wide score matrix (models x items), missing cells filled with the item mean."""
    up = parse_wide_csv((data_dir() / name / "scores.csv").read_bytes(),
                        ScoreScale(kind="continuous", minimum=None, maximum=None))
    return impute_item_mean(up.values)
