"""Unit tests of evalplan.core.selection.tuning (alpha minimizing Cap-MRE on calibration models, §4.1)."""

from __future__ import annotations

import numpy as np
import pytest

import evalplan.core.selection.tuning as tuning
from evalplan.core.selection.facility_location import FacilityLocation
from evalplan.core.selection.tuning import fill_missing_with_model_means, tune_alpha

CAPS = ["a", "a", "b"]


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = np.repeat([0, 1, 2], [40, 30, 30])
    topics = rng.integers(0, 6, 100)
    X = rng.standard_normal((6, 5))[topics] * 2 + rng.standard_normal((100, 5))
    # scores depend on the topic, so coverage of the topics matters
    Y = np.clip(rng.random((4, 6))[:, topics] + 0.1 * rng.standard_normal((4, 100)), 0.01, 1)
    return X, labels, Y


def cap_mre_by_hand(Y: np.ndarray, labels: np.ndarray, selected: np.ndarray) -> float:
    per_cap = []
    for cap in ("a", "b"):
        benches = [b for b in range(3) if CAPS[b] == cap]
        true = np.mean([Y[:, labels == b].mean(axis=1) for b in benches], axis=0)
        covered = [b for b in benches if np.any(labels[selected] == b)]
        pred = np.mean([Y[:, selected[labels[selected] == b]].mean(axis=1) for b in covered], axis=0)
        per_cap.append(np.mean(np.abs(pred - true) / true))
    return float(np.mean(per_cap))


def test_picks_the_grid_value_with_the_lowest_cap_mre() -> None:
    X, labels, Y = data()
    grid = (0.25, 1.0, 4.0, 16.0)
    best, table = tune_alpha(X, labels, 9, Y, CAPS, grid=grid)
    by_hand = [cap_mre_by_hand(Y, labels, FacilityLocation(k=9, alpha=a).fit(X, labels).ranking_) for a in grid]
    assert [row["alpha"] for row in table] == list(grid)
    assert [row["cap_mre"] for row in table] == pytest.approx(by_hand)
    assert best == grid[int(np.argmin(by_hand))]
    assert len(set(np.round(by_hand, 12))) > 1  # the case discriminates between grid values
    assert table[0]["t"] == int(np.ceil(0.25 * 100 / 9))


def test_selection_rule_ties_and_nan(monkeypatch: pytest.MonkeyPatch) -> None:
    X, labels, Y = data()
    errors_by_t: dict[int, dict[str, float]] = {}

    def fake_errors(Y_: np.ndarray, labels_: np.ndarray, caps: list[str], selected: np.ndarray) -> dict:
        return errors_by_t[current["t"]]

    current: dict[str, int] = {}
    real_fit = FacilityLocation.fit

    def fit(self: FacilityLocation, X_: np.ndarray, y_: np.ndarray) -> FacilityLocation:
        out = real_fit(self, X_, y_)
        current["t"] = out.t_
        return out

    monkeypatch.setattr(FacilityLocation, "fit", fit)
    monkeypatch.setattr(tuning, "coreset_errors", fake_errors)
    grid = (0.5, 1.0, 2.0, 4.0)  # t = 5, 10, 20, 40 for n = 100, k = 10
    errors_by_t.update({5: {"cap_mre": 0.2, "mre": 0.1}, 10: {"cap_mre": 0.1, "mre": 0.3},
                        20: {"cap_mre": 0.1, "mre": 0.2}, 40: {"cap_mre": float("nan"), "mre": 0.0}})
    assert tune_alpha(X, labels, 10, Y, CAPS, grid=grid)[0] == 2.0      # Cap-MRE tie -> lower MRE
    errors_by_t[20] = {"cap_mre": 0.1, "mre": 0.3}
    assert tune_alpha(X, labels, 10, Y, CAPS, grid=grid)[0] == 1.0      # full tie -> smaller alpha
    errors_by_t.update({5: {"cap_mre": float("nan"), "mre": 0.0}, 10: {"cap_mre": float("nan"), "mre": 0.0},
                        20: {"cap_mre": float("nan"), "mre": 0.0}, 40: {"cap_mre": 0.9, "mre": 0.9}})
    assert tune_alpha(X, labels, 10, Y, CAPS, grid=grid)[0] == 4.0      # NaN ranks last


def test_missing_scores_are_filled_with_the_model_mean() -> None:
    X, labels, Y = data(1)
    Yn = Y.copy()
    Yn[0, :7] = np.nan
    filled = fill_missing_with_model_means(Yn)
    assert np.allclose(filled[0, :7], np.nanmean(Yn[0]))
    assert np.array_equal(filled[:, 7:], Y[:, 7:])
    grid = (0.5, 2.0)
    assert tune_alpha(X, labels, 6, Yn, CAPS, grid=grid) == tune_alpha(X, labels, 6, filled, CAPS, grid=grid)
    with pytest.raises(ValueError):
        tune_alpha(X, labels, 6, np.full((2, 100), np.nan), CAPS)
    with pytest.raises(ValueError):
        tune_alpha(X, labels, 6, Y[:, :50], CAPS)
    with pytest.raises(ValueError):
        tune_alpha(X, labels, 6, Y, CAPS, grid=(0.0,))
