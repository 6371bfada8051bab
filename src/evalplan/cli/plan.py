"""``evalplan plan``: the budget planner on wide score CSVs, offline (no server, no database): per benchmark, the
smallest coreset that reaches +-half-width in backtests on the models, the items the default session and random
need on held-out models (``--session-targets``), and the suite's totals.

Imported inside the command (kept out of ``evalplan --help``): the CSV parser and ``json_safe``
(``evalplan.benchmarks.score_formats``, ``evalplan.kit.validation``: they load the web app's schemas) and the
planner (``evalplan.core.backtest.planner``: scikit-learn)."""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

from evalplan.core.benchmarks.score_scale import ScoreScale
from evalplan.kit.errors import InvalidInput


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pl = sub.add_parser("plan", help="budget planner on wide score CSVs (offline): the smallest coreset per "
                                     "benchmark that reaches +-half-width in backtests on the models")
    pl.add_argument("--scores", required=True, nargs="+", help="wide CSV(s), one benchmark each")
    pl.add_argument("--half-width", type=float, required=True, help="requested half-width in score units (0.02)")
    pl.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    pl.add_argument("--methods", default=None,
                    help="comma-separated candidates, 'method' or 'method:predictor' (default random:mean, "
                         "anchor_points:weighted_mean, mrmr:kernel_ridge)")
    pl.add_argument("--budgets", default=None, help="comma-separated fractions to try (default 1%%..75%%)")
    pl.add_argument("--seeds", type=int, default=3, help="backtest repetitions per (method, budget)")
    pl.add_argument("--max-seconds", type=float, default=None, help="time cap per benchmark")
    pl.add_argument("--session-targets", type=int, default=8,
                    help="held-out models per regime replayed as the default session and random (0 skips)")
    pl.add_argument("--json", action="store_true", help="print the plan as JSON (the job result's layout)")


def plan_command(args: argparse.Namespace) -> int:
    from evalplan.benchmarks.score_formats import parse_wide_csv
    from evalplan.core.backtest.planner import (
        DEFAULT_CANDIDATES,
        DEFAULT_FRACTIONS,
        parse_candidate,
        plan_benchmark,
        plan_suite,
    )
    from evalplan.core.backtest.session_planner import REGIME_LABELS, plan_session, suite_session_items
    from evalplan.kit.validation import json_safe

    try:
        candidates = ([parse_candidate(m) for m in args.methods.split(",") if m.strip()] if args.methods
                      else list(DEFAULT_CANDIDATES))
        fractions = ([float(b) for b in args.budgets.split(",") if b.strip()] if args.budgets
                     else list(DEFAULT_FRACTIONS))
        plans = {}
        for path in args.scores:
            with open(path, "rb") as fh:
                upload = parse_wide_csv(fh.read(), ScoreScale(kind="continuous", minimum=None, maximum=None))
            values = np.asarray(upload.values, dtype=float)
            finite = values[np.isfinite(values)]
            in_unit = finite.size > 0 and finite.min() >= 0 and finite.max() <= 1
            plan = plan_benchmark(values, args.half_width, args.level, candidates, fractions, args.seeds,
                                  score_range=(0.0, 1.0) if in_unit else (None, None), max_seconds=args.max_seconds)
            if args.session_targets:
                plan["session"] = plan_session(values, args.half_width, args.level, n_targets=args.session_targets,
                                               score_range=(0.0, 1.0) if in_unit else (-math.inf, math.inf),
                                               max_seconds=args.max_seconds)
            plans[path] = json_safe(plan)
    except (OSError, InvalidInput, ValueError) as exc:
        print(f"evalplan plan: {exc}", file=sys.stderr)
        return 2
    suite = plan_suite(plans)
    if args.session_targets:
        suite["session"] = json_safe(suite_session_items([p["session"] for p in plans.values()]))
    if args.json:
        print(json.dumps({"half_width": args.half_width, "level": args.level, "benchmarks": plans,
                          "suite": json_safe(suite)}, indent=2))
        return 0
    print(f"+-{args.half_width:g} at {args.level:g}: the smallest budget reached in backtests on the models\n")
    print("| benchmark | method | budget | of items | expected RMSE | interval width | stopped |")
    print("|---|---|---|---|---|---|---|")
    for path, p in plans.items():
        print(f"| {path} | {p['label']} | {p['budget']} | {p['n_items']} | {p['expected_rmse']:.4f} | "
              f"{p['interval_width']:.4f} | {p['stopped']} |")
    print(f"\nsuite: {suite['total_items']} of {suite['n_items']} items ({suite['fraction']:.1%}); "
          + ", ".join(f"{k}: {v}" for k, v in suite["split"].items()))
    if args.session_targets:
        print("\nA session instead (held-out models replayed as the default session and random, mean items to "
              "the stop):\n")
        print("| benchmark | held-out models | targets | session items | 90% upper | random items | vs random | "
              "covered |")
        print("|---|---|---|---|---|---|---|---|")
        for path, p in plans.items():
            for key, label in REGIME_LABELS.items():
                r = p["session"]["regimes"][key]
                if "skipped" in r:
                    print(f"| {path} | {label} | - | not measured: {r['skipped']} | | | | |")
                    continue
                upper = "n/a" if r["items_upper"] is None else f"{r['items_upper']:.0f}"
                print(f"| {path} | {label} | {r['targets']} | {r['items']:.0f} of {p['n_items']} | {upper} | "
                      f"{r['random']['items']:.0f} | {r['vs_random']:.2f}x | {r['coverage_at_stop']:.0%} |")
    return 0
