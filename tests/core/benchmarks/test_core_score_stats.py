"""Unit tests of evalplan.core.benchmarks.score_stats (no database)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalplan.core.benchmarks.score_stats import score_matrix_stats

nan = math.nan


def small_matrix() -> tuple[np.ndarray, list[str], list[str]]:
    # items:      a    b    c    d
    matrix = np.array([
        [1.0, 0.0, 0.5, nan],   # m1
        [1.0, 1.0, nan, nan],   # m2
        [1.0, 0.0, 0.5, nan],   # m3 (same row as m1)
    ])
    return matrix, ["m1", "m2", "m3"], ["a", "b", "c", "d"]


def test_counts_and_overall_values() -> None:
    stats = score_matrix_stats(*small_matrix())
    assert stats["n_models"] == 3
    assert stats["n_items"] == 4
    assert stats["n_scores"] == 8
    assert stats["missing_fraction"] == pytest.approx(4 / 12)
    assert stats["mean"] == pytest.approx(5 / 8)


def test_per_model_means_and_missing() -> None:
    stats = score_matrix_stats(*small_matrix())
    by_model = {m["model"]: m for m in stats["models"]}
    assert [m["model"] for m in stats["models"]] == ["m1", "m2", "m3"]
    assert by_model["m1"]["mean"] == pytest.approx(0.5)
    assert by_model["m2"]["mean"] == pytest.approx(1.0)
    assert by_model["m3"]["mean"] == pytest.approx(0.5)
    assert by_model["m1"]["n_scores"] == 3
    assert by_model["m2"]["n_scores"] == 2
    assert by_model["m1"]["missing_fraction"] == pytest.approx(0.25)
    assert by_model["m2"]["missing_fraction"] == pytest.approx(0.5)


def test_per_item_means_and_missing() -> None:
    stats = score_matrix_stats(*small_matrix())
    by_item = {i["item"]: i for i in stats["items"]}
    assert [i["item"] for i in stats["items"]] == ["a", "b", "c", "d"]
    assert by_item["a"]["mean"] == pytest.approx(1.0)
    assert by_item["b"]["mean"] == pytest.approx(1 / 3)
    assert by_item["c"]["mean"] == pytest.approx(0.5)
    assert by_item["d"]["mean"] is None
    assert by_item["d"]["n_scores"] == 0
    assert by_item["d"]["missing_fraction"] == pytest.approx(1.0)
    assert by_item["c"]["missing_fraction"] == pytest.approx(1 / 3)


def test_constant_items_need_an_observation() -> None:
    stats = score_matrix_stats(*small_matrix())
    assert stats["constant_items"] == [
        {"item": "a", "value": 1.0, "n_observed": 3},
        {"item": "c", "value": 0.5, "n_observed": 2},
    ]


def test_duplicate_models_are_identical_rows_including_missing() -> None:
    stats = score_matrix_stats(*small_matrix())
    assert stats["duplicate_models"] == [["m1", "m3"]]


def test_same_observed_values_with_other_missing_cells_are_not_duplicates() -> None:
    matrix = np.array([[1.0, nan], [1.0, 0.0], [1.0, 0.0]])
    stats = score_matrix_stats(matrix, ["x", "y", "z"], ["a", "b"])
    assert stats["duplicate_models"] == [["y", "z"]]


def test_negative_zero_equals_zero_for_duplicates() -> None:
    matrix = np.array([[-0.0, 1.0], [0.0, 1.0]])
    stats = score_matrix_stats(matrix, ["x", "y"], ["a", "b"])
    assert stats["duplicate_models"] == [["x", "y"]]
    assert stats["constant_items"][0]["item"] == "a"


def test_stats_are_json_plain_values() -> None:
    import json

    stats = score_matrix_stats(*small_matrix())
    # NaN must never leak into the JSON result (it is not valid JSON).
    text = json.dumps(stats, allow_nan=False)
    assert json.loads(text)["items"][3]["mean"] is None


def test_empty_matrix() -> None:
    stats = score_matrix_stats(np.zeros((0, 0)), [], [])
    assert stats["n_scores"] == 0
    assert stats["missing_fraction"] == 0.0
    assert stats["mean"] is None
    assert stats["models"] == [] and stats["items"] == []
    assert stats["constant_items"] == [] and stats["duplicate_models"] == []


def test_names_must_match_shape() -> None:
    with pytest.raises(ValueError):
        score_matrix_stats(np.zeros((2, 2)), ["a"], ["x", "y"])


def test_items_without_any_model() -> None:
    # A benchmark with uploaded items but no scores yet: shape (0, n_items).
    stats = score_matrix_stats(np.zeros((0, 3)), [], ["a", "b", "c"])
    assert stats["n_models"] == 0 and stats["n_items"] == 3 and stats["n_scores"] == 0
    assert stats["missing_fraction"] == 0.0  # no cells at all
    assert [i["mean"] for i in stats["items"]] == [None, None, None]
    assert stats["constant_items"] == []
    assert stats["duplicate_models"] == []
