"""The score-based family's parameters and constants: each method's parameter specs (``METHOD_PARAMS``: the
selectors' own, ``irt``'s and ``auto``'s), the least references, the calibration folds and the design-interval
defaults; read by :mod:`~evalplan.coresets.families.score_based.validate` and
:mod:`~evalplan.coresets.families.score_based.select`."""

from __future__ import annotations

from evalplan.core.coresets.auto import CHOICE_RULE, CHOICE_RULES, INNER_FOLDS, MAX_SECONDS, OUTER_FOLDS, SE_MULT
from evalplan.core.coresets.intervals import INTERVAL_RULES
from evalplan.core.selection.base import ParamSpec
from evalplan.core.selection.score_based import SCORE_PARAMS
from evalplan.coresets.families.design_predictions import DESIGN

IRT_PARAMS: dict[str, ParamSpec] = {
    "dim": ParamSpec(int, "IRT dimension; default: chosen from 5 and 10 by tinyBenchmarks' validation heuristic",
                     minimum=1, maximum=64),
    "epochs": ParamSpec(int, "SVI epochs of the IRT fit (py-irt default 2000)", minimum=1, maximum=100000),
    "lr": ParamSpec(float, "Adam learning rate of the IRT fit (py-irt default 0.1)", minimum=0, exclusive_minimum=True),
}
AUTO_PARAMS: dict[str, ParamSpec] = {
    "max_seconds": ParamSpec(float, f"wall-time cap of the whole choice, all benchmarks together (default "
                             f"{MAX_SECONDS:g}); selectors that would not fit are skipped", minimum=0,
                             exclusive_minimum=True, maximum=3600),
    "outer_folds": ParamSpec(int, f"folds of the references for the honest (outer) error (default {OUTER_FOLDS})",
                             minimum=2, maximum=10),
    "inner_folds": ParamSpec(int, f"folds of each training set for the choice (default {INNER_FOLDS})",
                             minimum=2, maximum=10),
    "selectors": ParamSpec(list, "selectors to choose among (default all: random, mrmr, lasso, anchor_points, "
                           "random_search, irt)"),
    "choice": ParamSpec(str, "how the inner cross-validation chooses: 'prior' (default: mRMR with the mean of ridge "
                        "and kernel ridge unless a candidate beats it by more than se_mult standard errors) or "
                        "'min' (the lowest inner RMSE)", default=CHOICE_RULE, choices=CHOICE_RULES),
    "se_mult": ParamSpec(float, f"standard errors a candidate must beat the prior by (default {SE_MULT:g})",
                         default=SE_MULT, minimum=0, maximum=100),
}
METHOD_PARAMS: dict[str, dict[str, ParamSpec]] = {**SCORE_PARAMS, "irt": IRT_PARAMS, "auto": AUTO_PARAMS}
MIN_REFERENCES = 3  # LOO intervals need a few references; random_search (Search+) needs >= 3 for CV
CALIBRATION_FOLDS = 10  # folds of the references for the cross-fitted interval errors
NON_SELECTOR_PARAMS = ("irt", "interval", "method_share")  # params of the predictor / interval, not the selector
CORESET_INTERVALS = (*INTERVAL_RULES, DESIGN)
DEFAULT_METHOD_SHARE = 0.0  # measured: any take-all share of the method widened the design interval (RESULTS)
WEIGHTED_METHODS = ("anchor_points", "irt")  # methods whose weights_ are non-negative item weights


def method_items(k: int, share: float) -> int:
    """Items of a design coreset's budget ``k`` that the method selects and the design takes whole."""
    return int(round(share * k))
