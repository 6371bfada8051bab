"""What a session's interval is, in words, for charts, pages, CSV headers and the API (issue 34: the chart
called every band a "credible interval", also ``active_design``'s confidence sequence and ``random``'s exact
finite-population interval).

* ``active_design``: by default (``interval_kind: sequential``) the Chow-Robbins **sequential confidence
  interval** (valid at the precision stop, issue 33); with ``interval_kind: anytime`` a betting **confidence
  sequence** (anytime-valid); with ``fixed_n`` the martingale-CLT **confidence interval** (a fixed budget);
* ``random``: the exact finite-population **confidence interval** (fixed n); with ``interval: paper_normal``
  (the former ``rs_mean``) the normal interval of papers/004's RS-Mean, labelled as ``rs_mean``'s below;
* ``refgp`` with ``variance: design_loo`` (the former ``refgp_dr``): the difference estimator's design-based
  **confidence interval**;
* ``fluid_irt``: a delta-method **approximate interval** around the MAP ability;
* the Bayesian methods (``refgp``'s other variances, ``bayesame``, ``bayesame_rs``, ``rs_mean``,
  ``proeval_bq``): the posterior's **credible interval**;
* any single-target session stopping with ``stop.anytime_valid``: the betting **confidence sequence** that
  replaces the method's own interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import REFGP_DEFAULT, REFGP_VARIANTS

CONFIDENCE_SEQUENCE = "confidence sequence"
CONFIDENCE_INTERVAL = "confidence interval"
CREDIBLE_INTERVAL = "credible interval"
APPROXIMATE_INTERVAL = "approximate interval"
SEQUENTIAL_INTERVAL = "sequential confidence interval"

#: the short phrase after the kind, saying what it holds for
QUALIFIER = {CONFIDENCE_SEQUENCE: "anytime-valid", CONFIDENCE_INTERVAL: "fixed n",
             CREDIBLE_INTERVAL: "posterior", APPROXIMATE_INTERVAL: "delta method",
             SEQUENTIAL_INTERVAL: "valid at the stop"}


def interval_kind_of(method: str, config: Mapping[str, Any] | None = None, *, multi_target: bool = False) -> str:
    """The kind of interval a session of ``method`` with the stored ``config`` reports (one of the constants)."""
    config = config or {}
    stop = config.get("stop") or {}
    if not multi_target and isinstance(stop, Mapping) and stop.get("anytime_valid"):
        return CONFIDENCE_SEQUENCE
    if method == "active_design":
        kind = str(config.get("interval_kind") or "sequential")
        return {"fixed_n": CONFIDENCE_INTERVAL, "anytime": CONFIDENCE_SEQUENCE}.get(kind, SEQUENTIAL_INTERVAL)
    if method == "random":  # interval paper_normal is the former rs_mean's (below)
        params = config.get("method_params") or {}
        return CREDIBLE_INTERVAL if params.get("interval") == "paper_normal" else CONFIDENCE_INTERVAL
    if method.startswith("refgp"):
        preset = REFGP_VARIANTS.get(method) or REFGP_VARIANTS[REFGP_DEFAULT]
        params = {**preset, **(config.get("method_params") or {})} if method == "refgp" else preset
        return CONFIDENCE_INTERVAL if params.get("variance") == "design_loo" else CREDIBLE_INTERVAL
    if method == "fluid_irt":
        return APPROXIMATE_INTERVAL
    return CREDIBLE_INTERVAL


def interval_label(level: float, method: str, config: Mapping[str, Any] | None = None, *,
                   multi_target: bool = False) -> str:
    """``"95% confidence sequence (anytime-valid)"``: the level, the kind and what it holds for."""
    kind = interval_kind_of(method, config, multi_target=multi_target)
    return f"{level * 100:g}% {kind} ({QUALIFIER[kind]})"
