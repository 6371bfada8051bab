"""One default interval level (docs/DECISIONS.md "One default interval level: 0.95"; issue 36 item 7): the
library functions and chart specs default to the service's level, not to 0.9."""

from __future__ import annotations

import inspect

from evalplan import charts
from evalplan.core.backtest.backtest import run_backtest
from evalplan.core.backtest.suite_backtest import run_suite_backtest
from evalplan.core.coresets.intervals import guarded_predict, loo_conformal_interval
from evalplan.core.sequential.stopping import DEFAULT_LEVEL


def test_every_level_default_is_the_service_default() -> None:
    assert DEFAULT_LEVEL == 0.95
    for function in (loo_conformal_interval, guarded_predict, run_backtest, run_suite_backtest,
                     charts.predicted_vs_true, charts.backtest_curves, charts.session_trajectory,
                     charts.sessions_side_by_side, charts.paired_difference):
        assert inspect.signature(function).parameters["level"].default == DEFAULT_LEVEL, function.__name__
