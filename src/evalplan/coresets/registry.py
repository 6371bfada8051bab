"""The coreset-family registry: method name -> family, and the one list of coreset method names.

:data:`METHODS` feeds the request validation (:func:`family_of`), the OpenAPI enum of
``POST /v1/coresets`` ``method`` and the backtests (:data:`BACKTEST_METHODS`). A new family is a
module in ``src/evalplan/coresets/families/`` implementing :class:`~evalplan.coresets.families.base.CoresetFamily`,
listed in :data:`FAMILIES`.
"""

from __future__ import annotations

from evalplan.coresets.families.base import CoresetFamily
from evalplan.coresets.families.hidden_state import HIDDEN_STATE
from evalplan.coresets.families.score_based import SCORE_BASED
from evalplan.coresets.families.text import TEXT
from evalplan.kit.errors import InvalidInput

FAMILIES: tuple[CoresetFamily, ...] = (TEXT, SCORE_BASED, HIDDEN_STATE)
FAMILY_OF_METHOD: dict[str, CoresetFamily] = {method: family for family in FAMILIES for method in family.methods}
METHODS: tuple[str, ...] = tuple(sorted(FAMILY_OF_METHOD))
#: selectors a backtest replays (papers/002 §3): the random baseline and every score-based method
BACKTEST_METHODS: tuple[str, ...] = ("random", *SCORE_BASED.methods)


def family_of(method: str) -> CoresetFamily:
    """The family of ``method``; 422 listing the valid methods for an unknown one."""
    family = FAMILY_OF_METHOD.get(method)
    if family is None:
        valid = list(METHODS)
        raise InvalidInput(f"unknown method {method!r}; valid methods: {', '.join(valid)}",
                           [{"field": "method", "detail": f"one of {valid}"}])
    return family


def methods_description() -> str:
    """The methods per family, for the OpenAPI description of ``method``."""
    return "; ".join(f"{family.name.replace('_', '-')}: {', '.join(family.methods)}" for family in FAMILIES)
