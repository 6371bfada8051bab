"""Request model of ``POST /v1/plans`` (API.md "Plans"): the budget planner (``evalplan.core.backtest.planner``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalplan.core.backtest.session_planner import SESSION_TARGETS
from evalplan.core.sequential.stopping import DEFAULT_LEVEL


class PlanCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    benchmarks: str | list[str] = Field(
        description="One benchmark name/id, or a list: one plan each and a suite total.")
    half_width: float = Field(description="Requested interval half-width, in score units (0.02 = +-2 points on a "
                                          "0-1 benchmark); > 0.")
    level: float = Field(DEFAULT_LEVEL, description="Interval level, in (0, 1); default 0.95.")
    reference_models: list[str] | Literal["all"] = Field(
        "all", description='Models whose scores the backtests use: a list of names/ids or "all" (default).')
    methods: list[str] | None = Field(
        None, description='Candidates: "method" (its default predictor) or "method:predictor"; methods among '
                          "random, anchor_points, mrmr, lasso, random_search, hardness, pbsc, irt. Default: "
                          "random:mean, anchor_points:weighted_mean, mrmr:kernel_ridge.")
    budgets: list[float] | None = Field(
        None, description="Coreset sizes to try, as fractions of each benchmark in (0, 1) (default 1%..75%).")
    seeds: int = Field(3, description="Backtest repetitions per (method, budget), 1..10.")
    params: dict[str, dict[str, Any]] | None = Field(
        None, description="Selector parameters per method, as in POST /v1/coresets `params`.")
    cost_per_item: float | None = Field(
        None, description="Optional compute cost of evaluating one item (any unit: GPU-seconds, dollars); the plan "
                          "then reports the compute it saves against running every item (> 0).")
    max_seconds: float | None = Field(
        None, description="Stop trying larger budgets of a benchmark after this many seconds (> 0); the session "
                          "replay of a benchmark gets the same allowance.")
    session_targets: int = Field(
        SESSION_TARGETS, description="Held-out references replayed as sessions per regime (random models, the best "
                                     "models) to measure the items the default session and `random` need for "
                                     "half_width: 0 skips it, at most 40, default 8 (each benchmark's `session` "
                                     "block).")
