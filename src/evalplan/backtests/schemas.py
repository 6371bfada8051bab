"""Request model of ``POST /v1/backtests``: the backtest of score-based coresets (papers/002 §3), or
with ``sequential: true`` the sequential backtest of session methods (issue 11 §4)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from evalplan.core.sequential.stopping import DEFAULT_LEVEL
from evalplan.kit.schemas import RequestModel, Visibility


class BacktestCreate(RequestModel):

    benchmarks: str | list[str] = Field(description="One benchmark name/id, or a list (rows are tagged `benchmark`).")
    visibility: Visibility = Field("private", description="The backtest job's visibility: private (the owning team "
                                                          "only) or public (readable by every team).")
    sequential: bool = Field(False, description="true: replay held-out models as session targets for each session "
                                                "method (evalplan.core.backtest.sequential_backtest); then methods "
                                                "are session methods (default all), budgets are item counts "
                                                "(default 25, 50, 100, 200), level defaults to 0.95, and stop / "
                                                "regimes / n_targets / reference_cap / max_items / seed apply.")
    methods: list[str] | None = Field(None, min_length=1, max_length=100,
                                      description='Selectors: "random", "irt" and the score-based methods '
                                                  "(required); with sequential: session methods.")
    predictors: list[str] | dict[str, str | list[str]] | None = Field(
        None, description="A list applied to every method, or method -> name(s); default per method "
                          "(random: mean, anchor_points: weighted_mean, irt: gp_irt, else kernel_ridge).")
    budgets: list[float] = Field(default_factory=lambda: [0.05, 0.1, 0.15], min_length=1, max_length=100,
                                 description="Coreset sizes as fractions of the items, in (0, 1].")
    n_reference: int = Field(30, description="Reference models per trial: 3 <= n_reference < number of models.")
    split: str = Field("stratified", description="random, stratified (10 score bins) or extrapolation.")
    seeds: int = Field(5, description="Number of seeds (trials), 1..20; seeds 0..n-1.")
    metric: str | None = Field(None, description="Score metric; default each benchmark's default metric.")
    level: float = Field(DEFAULT_LEVEL, gt=0, lt=1,
                         description="Interval level of the coverage and interval_width columns (sequential: the "
                                     "sessions' level); default 0.95.")
    params: dict[str, dict[str, Any]] | None = Field(
        None, description="Selector parameters per method, as in POST /v1/coresets `params` (e.g. "
                          '{"anchor_points": {"n_init": 1}, "random_search": {"n_trials": 1000}}).')
    suite: bool = Field(False, description="Treat the benchmarks (>= 2) as ONE multi-benchmark coreset: models "
                                           "with scores on every benchmark, references shared, each budget a "
                                           "total split in proportion to benchmark size; rows per benchmark "
                                           "and one `overall` row (benchmark = \"overall\").")
    stop: dict[str, Any] | list[dict[str, Any]] | None = Field(
        None, description="sequential only: the precision rule(s) {half_width, level?, min_items?, anytime_valid?} "
                          'whose items to stop are reported (default [{"half_width": 0.02}]).')
    regimes: list[str] | None = Field(None, description='sequential only: "interpolation" and/or "extrapolation" '
                                                        '(default ["interpolation"]).')
    n_targets: int | None = Field(None, description="sequential only: held-out targets per regime (default 20).")
    reference_cap: int | None = Field(None, description="sequential only: at most this many references, drawn at "
                                                        "random (default 100).")
    max_items: int | dict[str, Any] | None = Field(
        None, description='sequential only: items per replayed session, an int or {"fraction": f} (default the '
                          "larger of the largest budget and 30% of the items).")
    seed: int | None = Field(None, description="sequential only: seed of the target draw and the sessions (default 0).")
