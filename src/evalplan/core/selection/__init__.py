"""Prompt-selection methods on text embeddings (paper §3.1 facility location, §4.2 baselines).

``TEXT_METHODS`` maps a method name to its selector class. Each class is built as
``cls(k=k, seed=seed, **params)`` with ``params`` among ``cls.PARAMS`` (name -> ``ParamSpec(type,
description)``); ``cls(...).validate_params()`` checks the values without fitting, and
``fit(embeddings, labels)`` sets ``ranking_`` and ``gains_`` (see ``base``).

``REFERENCE_TEXT_METHODS`` are text methods that also need the reference models' scores: their
``fit(embeddings, labels, difficulty)`` takes each item's mean reference score (``hybrid``; not a
paper's method).
"""

from __future__ import annotations

from evalplan.core.selection.base import BaseSelector, CoresetSelector, ParamSpec, TextSelector
from evalplan.core.selection.baselines import DPP, KCenter, KMeansSelection, RandomSelection, StratifiedRandom
from evalplan.core.selection.facility_location import (
    FacilityLocation,
    build_similarity_graph,
    facility_location_value,
    greedy_facility_location,
)
from evalplan.core.selection.hybrid import HybridFacilityLocation

TEXT_METHODS: dict[str, type[TextSelector]] = {
    "facility_location": FacilityLocation,
    "random": RandomSelection,
    "stratified_random": StratifiedRandom,
    "dpp": DPP,
    "k_center": KCenter,
    "k_means": KMeansSelection,
}

#: text methods that need reference scores (each item's difficulty) besides the embeddings
REFERENCE_TEXT_METHODS: dict[str, type[TextSelector]] = {
    "facility_location_hybrid": HybridFacilityLocation,
}

__all__ = [
    "TEXT_METHODS", "REFERENCE_TEXT_METHODS", "HybridFacilityLocation",
    "TextSelector", "BaseSelector", "CoresetSelector", "ParamSpec", "FacilityLocation",
    "RandomSelection", "StratifiedRandom",
    "DPP", "KCenter", "KMeansSelection", "build_similarity_graph", "greedy_facility_location",
    "facility_location_value",
]
