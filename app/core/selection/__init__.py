"""Prompt-selection methods on text embeddings (paper §3.1 facility location, §4.2 baselines).

``TEXT_METHODS`` maps a method name to its selector class. Each class is built as
``cls(k=k, seed=seed, **params)`` with ``params`` among ``cls.PARAMS`` (name -> ``ParamSpec(type,
description)``); ``cls(...).validate_params()`` checks the values without fitting, and
``fit(embeddings, labels)`` sets ``ranking_`` and ``gains_`` (see ``base``).
"""

from __future__ import annotations

from app.core.selection.base import BaseSelector, CoresetSelector, ParamSpec, TextSelector
from app.core.selection.baselines import DPP, KCenter, KMeansSelection, RandomSelection, StratifiedRandom
from app.core.selection.facility_location import (
    FacilityLocation,
    build_similarity_graph,
    facility_location_value,
    greedy_facility_location,
)

TEXT_METHODS: dict[str, type[TextSelector]] = {
    "facility_location": FacilityLocation,
    "random": RandomSelection,
    "stratified_random": StratifiedRandom,
    "dpp": DPP,
    "k_center": KCenter,
    "k_means": KMeansSelection,
}

__all__ = [
    "TEXT_METHODS", "TextSelector", "BaseSelector", "CoresetSelector", "ParamSpec", "FacilityLocation",
    "RandomSelection", "StratifiedRandom",
    "DPP", "KCenter", "KMeansSelection", "build_similarity_graph", "greedy_facility_location",
    "facility_location_value",
]
