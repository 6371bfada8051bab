"""Which interval answered a score-based prediction, and why (issue 35 item 1): the ``"extended"`` rule's shrinkage
extension (``evalplan.core.coresets.intervals.shrinkage_extended_interval``) applied after the reference-calibrated
interval, and the sentence each benchmark entry, capability and overall carry as ``interval_why``."""

from __future__ import annotations

import numpy as np

from evalplan.core.coresets.intervals import EXTENDED, shrinkage_extended_interval

KIND_WORDS = {"cross_fitted": "cross-fitted errors (selection and predictor refitted on folds of the references)",
              "reference_residuals": "residuals under the stored IRT model",
              "pooled": "errors pooled reference by reference over the benchmarks"}


def extend(rule: str, center: np.ndarray, lower: np.ndarray, upper: np.ndarray, errors: np.ndarray,
           fixed: np.ndarray | None, reference_truth: np.ndarray, top: np.ndarray, kind: str
           ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(lower, upper, why)`` per target: under ``"extended"`` with the fixed-coreset errors known, the interval
    extended toward the classical calibration estimate; ``why`` names the rule that sized the interval, the
    top-decile widening where it acted and the extension."""
    base = "calibrated" if fixed is not None else "conformal"
    c = np.atleast_1d(np.asarray(center, dtype=float))
    lo, hi = np.atleast_1d(np.asarray(lower, dtype=float)), np.atleast_1d(np.asarray(upper, dtype=float))
    tops = np.atleast_1d(np.asarray(top, dtype=bool))
    shift = np.zeros(c.shape)
    deshrunk, slope = c, 1.0
    if rule == EXTENDED and fixed is not None:
        ext = shrinkage_extended_interval(c, lo, hi, errors, reference_truth)
        lo, hi, shift, deshrunk, slope = ext.lower, ext.upper, ext.shift, ext.deshrunk, ext.slope
    why = []
    for j in range(c.size):
        text = f"{base}: sized on the references' {KIND_WORDS.get(kind, kind)}"
        if tops[j]:
            text += "; top decile: at least the errors of the references with the highest held-out predictions"
        if rule == EXTENDED and fixed is not None:
            if shift[j] != 0.0:
                text += (f"; extended by {shift[j]:+.4g} to also hold the de-shrunk estimate {deshrunk[j]:.4g}: the "
                         f"references' held-out predictions follow their true scores with slope {slope:.2f}, so an "
                         "estimate away from their mean is pulled toward it")
            else:
                text += "; not extended: the references' held-out predictions show no shrinkage"
        why.append(text)
    return lo, hi, why


def loo_why(predictor: str, extrapolated: bool) -> str:
    """The sentence of an interval on leave-one-reference-out errors (the extrapolation guard's AIPW, an older
    coreset)."""
    text = f"conformal: {predictor} with the split-conformal quantile of its leave-one-reference-out errors"
    if extrapolated:
        text += ("; extrapolation: the target's coreset mean is outside the references', so the guard answers "
                 "with AIPW (its level is the target's own coreset mean)")
    return text
