"""The name of each session method's interval (issue 34: the chart called every band a credible interval)."""

from __future__ import annotations

import pytest

from evalplan.core.sequential.config import METHODS
from evalplan.core.sequential.interval_names import (
    APPROXIMATE_INTERVAL,
    CONFIDENCE_INTERVAL,
    CONFIDENCE_SEQUENCE,
    CREDIBLE_INTERVAL,
    SEQUENTIAL_INTERVAL,
    interval_kind_of,
    interval_label,
)


@pytest.mark.parametrize(("method", "config", "kind"), [
    ("active_design", {}, SEQUENTIAL_INTERVAL),
    ("active_design", {"interval_kind": "anytime"}, CONFIDENCE_SEQUENCE),
    ("active_design", {"interval_kind": "fixed_n"}, CONFIDENCE_INTERVAL),
    ("random", {}, CONFIDENCE_INTERVAL),
    ("random", {"stop": {"half_width": 0.05, "anytime_valid": True}}, CONFIDENCE_SEQUENCE),
    ("refgp", {}, CREDIBLE_INTERVAL),
    ("refgp", {"method_params": {"variance": "design_loo", "selection": "random"}}, CONFIDENCE_INTERVAL),
    ("refgp_dr", {}, CONFIDENCE_INTERVAL),
    ("refgp_v3", {}, CREDIBLE_INTERVAL),
    ("bayesame", {}, CREDIBLE_INTERVAL),
    ("bayesame", {"stop": {"half_width": 0.05, "anytime_valid": True}}, CONFIDENCE_SEQUENCE),
    ("proeval_bq", {}, CREDIBLE_INTERVAL),
    ("fluid_irt", {}, APPROXIMATE_INTERVAL),
])
def test_each_method_names_its_interval(method: str, config: dict, kind: str) -> None:
    assert interval_kind_of(method, config) == kind


def test_every_method_has_a_name_and_the_label_carries_the_level() -> None:
    for method in METHODS:
        assert interval_kind_of(method, None) in (CONFIDENCE_SEQUENCE, CONFIDENCE_INTERVAL, CREDIBLE_INTERVAL,
                                                  APPROXIMATE_INTERVAL, SEQUENTIAL_INTERVAL)
    assert interval_label(0.95, "active_design") == "95% sequential confidence interval (valid at the stop)"
    assert interval_label(0.95, "active_design", {"interval_kind": "anytime"}) == "95% confidence sequence (anytime-valid)"
    assert interval_label(0.9, "random") == "90% confidence interval (fixed n)"
    assert interval_label(0.95, "bayesame", {"stop": {"anytime_valid": True}}, multi_target=True) \
        == "95% credible interval (posterior)"  # the betting sequence is for single-target sessions only
