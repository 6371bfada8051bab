"""Predictions of design-based score coresets (``params.interval: "design"``, issue 25 §3): per benchmark the
difference estimator of ``evalplan.core.coresets.design_coreset`` on the target's scores at the drawn items, with the
design's Student-t interval; capabilities and overall are the mean of the benchmarks' independent estimates
(:func:`~evalplan.core.coresets.design_coreset.mean_of_estimates`). No predictor and no reference calibration: the
interval's validity is the draw's, so it holds for a target better than every reference."""

from __future__ import annotations

from typing import Any

import numpy as np

from evalplan.core.coresets.design_coreset import DesignCoreset, DesignEstimate, design_estimate, mean_of_estimates
from evalplan.kit.validation import finite_or_none

DESIGN = "design"


def _entry(e: DesignEstimate, lo: float, hi: float) -> dict[str, Any]:
    """The response fields of one estimate; the point estimate clipped to the score range as its interval is (a
    difference estimate can leave it by a little when the drawn residuals are all of one sign)."""
    return {"estimate": float(min(max(e.estimate, lo), hi)),
            "interval": [finite_or_none(e.lower), finite_or_none(e.upper)],
            "std_error": finite_or_none(e.std_error), "interval_rule": DESIGN,
            "interval_why": "design: the draw's difference estimate with its Student-t interval (stratified variance, "
                            "Satterthwaite degrees of freedom); valid for any target, one better than every reference "
                            "included"}


def design_predict_many(method: str, fits: dict[str, Any], benchmark_ids: list[str], names: dict[str, str],
                        capabilities: dict[str, str], targets: list[tuple[dict[int, float], str | None]],
                        level: float, coreset_id: str) -> list[dict[str, Any]]:
    """One prediction per target (the shape of ``score_predictions.predict_many``'s); every coreset item of
    every benchmark has a score (checked by the caller); estimates and intervals lie in each draw's score range.
    ``extrapolation``: the estimate lies outside the
    references' full-benchmark scores (informative only: the interval does not depend on it)."""
    designs = {bid: DesignCoreset.from_state(fits[bid]["design"]) for bid in benchmark_ids}
    out: list[dict[str, Any]] = []
    for values, model_name in targets:
        entries: dict[str, dict[str, Any]] = {}
        parts: list[tuple[str, DesignEstimate, float, float]] = []
        any_flag = False
        for bid in benchmark_ids:
            fit, design = fits[bid], designs[bid]
            y = np.array([values[pk] for pk in fit["items"]], dtype=float)
            e = design_estimate(design, y, level=level)
            y_ref = np.asarray(fit["y_ref"], dtype=float)
            flag = bool(e.estimate > y_ref.max() or e.estimate < y_ref.min())
            any_flag |= flag
            parts.append((capabilities[bid], e, design.lo, design.hi))
            entries[names[bid]] = {**_entry(e, design.lo, design.hi), "predictor": DESIGN, "extrapolation": flag,
                                   "n_items": int(y.size), "n_total": int(fit["n_items"]), "calibration": DESIGN,
                                   "method": f"{method}+{DESIGN}"}

        def combine(group: list[tuple[str, DesignEstimate, float, float]]) -> dict[str, Any]:
            lo, hi = float(np.mean([g[2] for g in group])), float(np.mean([g[3] for g in group]))
            mean = mean_of_estimates([g[1] for g in group], level, lo, hi)
            return {**_entry(mean, lo, hi), "n_benchmarks": len(group), "n_benchmarks_total": len(group)}

        caps = {cap: combine([p for p in parts if p[0] == cap]) for cap in dict.fromkeys(p[0] for p in parts)}
        out.append({"coreset": coreset_id, "model": model_name, "level": level, "benchmarks": entries,
                    "capabilities": caps, "overall": combine(parts), "extrapolation": any_flag, "agreement": None})
    return out


def design_reference_rows(fits: dict[str, Any], benchmark_ids: list[str], names: dict[str, str],
                          references: list[str], level: float) -> list[dict[str, Any]]:
    """Each reference's full-benchmark score and its design estimate from its own scores at the drawn items
    (rows ``{model, benchmark, true, predicted, lo, hi}`` as ``score_predictions.reference_predictions``).
    The references designed the strata and assist the working model, but the interval's coverage is over the
    draw, so these rows show what a user gets, not a fit to the references."""
    rows: list[dict[str, Any]] = []
    for bid in benchmark_ids:
        fit = fits.get(bid) or {}
        if not fit.get("design") or bid not in names:
            continue
        design = DesignCoreset.from_state(fit["design"])
        X = np.asarray(fit["X_ref"], dtype=float)
        for i, name in enumerate(references[:X.shape[0]]):
            e = design_estimate(design, X[i], level=level)
            rows.append({"model": name, "benchmark": names[bid], "true": float(fit["y_ref"][i]),
                         "predicted": e.estimate, "lo": finite_or_none(e.lower), "hi": finite_or_none(e.upper)})
    return rows
