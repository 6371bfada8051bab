"""``evalplan backtest``: backtest score-based coresets on wide score CSVs, offline (no server, no database): one
file at a time, several as one suite (``--suite``), or the session methods replayed on held-out models
(``--sequential``, the engine of ``POST /v1/backtests`` with ``sequential: true``).

Imported inside the command (kept out of ``evalplan --help``): the CSV parser
(``evalplan.benchmarks.score_formats``, which loads the web app's schemas) and the static backtests
(``evalplan.core.backtest.backtest``, ``evalplan.core.backtest.suite_backtest``: scikit-learn)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from evalplan.core.backtest import sequential_backtest
from evalplan.core.benchmarks.score_scale import ScoreScale
from evalplan.core.sequential.stopping import DEFAULT_LEVEL, StopRule
from evalplan.kit.errors import InvalidInput

if TYPE_CHECKING:
    from evalplan.benchmarks.score_formats import ScoreUpload


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bt = sub.add_parser("backtest", help="backtest score-based coresets on a wide score CSV (offline)")
    bt.add_argument("--scores", required=True, nargs="+",
                    help="wide CSV(s): first column 'model', one column per item; several files are "
                         "backtested one by one, or as one suite with --suite")
    bt.add_argument("--suite", action="store_true",
                    help="treat the CSVs as ONE multi-benchmark coreset (models present in every file, "
                         "shared references, each budget a total split by size); prints per-benchmark "
                         "and overall tables")
    bt.add_argument("--methods", default=None,
                    help="comma-separated selectors among random, irt, anchor_points, lasso, random_search, "
                         "hardness, pbsc, mrmr (default random,anchor_points,mrmr); with --sequential: session "
                         "methods (default all)")
    bt.add_argument("--predictors", default=None,
                    help="method=pred[+pred...] pairs, comma-separated (e.g. 'mrmr=ridge+kernel_ridge,"
                         "random=mean'); default: random=mean, anchor_points=weighted_mean, irt=gp_irt, "
                         "others kernel_ridge")
    bt.add_argument("--budgets", default=None, help="comma-separated coreset fractions of the items (default "
                                                    "0.05,0.1); with --sequential: item counts (default 25,50,100,200)")
    bt.add_argument("--n-reference", type=int, default=30, help="number of reference models")
    bt.add_argument("--split", default="stratified", choices=["random", "stratified", "extrapolation"])
    bt.add_argument("--seeds", type=int, default=5, help="number of seeds (splits), 0..n-1")
    bt.add_argument("--level", type=float, default=None,
                    help="interval level for coverage (default 0.95); --sequential: the sessions' level "
                         "(default 0.95)")
    bt.add_argument("--sequential", action="store_true",
                    help="sequential backtest: replay held-out models as session targets for each session method "
                         "(evalplan.core.backtest.sequential_backtest), like POST /v1/backtests with sequential: true")
    bt.add_argument("--regimes", default="interpolation", help="--sequential: interpolation and/or extrapolation")
    bt.add_argument("--targets", type=int, default=20, help="--sequential: held-out targets per regime")
    bt.add_argument("--half-widths", default="0.02",
                    help="--sequential: comma-separated stop half-widths whose items to stop are reported")
    bt.add_argument("--max-items", type=int, default=None,
                    help="--sequential: items per replayed session (default max(largest budget, 30%% of items))")
    bt.add_argument("--reference-cap", type=int, default=100, help="--sequential: at most this many references")
    bt.add_argument("--output", default=None, help="--sequential: also write the markdown tables to this file")
    bt.add_argument("--no-intervals", action="store_true", help="skip the conformal coverage column")


def backtest_command(args: argparse.Namespace) -> int:
    from evalplan.benchmarks.score_formats import parse_wide_csv
    from evalplan.core.backtest.backtest import DEFAULT_PREDICTOR as DEFAULT_PREDICTORS
    from evalplan.core.backtest.backtest import markdown_table, run_backtest, summarize
    from evalplan.core.backtest.suite_backtest import run_suite_backtest

    uploads = []
    for path in args.scores:
        try:
            with open(path, "rb") as fh:
                uploads.append(parse_wide_csv(fh.read(), ScoreScale(kind="continuous", minimum=None, maximum=None)))
        except OSError as exc:
            print(f"evalplan backtest: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        except InvalidInput as exc:
            print(f"evalplan backtest: {path}: {exc}", file=sys.stderr)
            return 2
    if args.sequential:
        return sequential_backtest_command(args, uploads)
    if args.level is None:
        args.level = DEFAULT_LEVEL
    methods = [m.strip() for m in (args.methods or "random,anchor_points,mrmr").split(",") if m.strip()]
    predictors: dict[str, list[str]] = {}
    if args.predictors:
        for pair in args.predictors.split(","):
            if not pair.strip():
                continue
            name, sep, preds = pair.partition("=")
            if not sep:
                print(f"evalplan backtest: --predictors entry {pair!r} is not method=predictor", file=sys.stderr)
                return 2
            predictors[name.strip()] = [p.strip() for p in preds.split("+") if p.strip()]
    header = (f"split={args.split}, M={args.n_reference}, seeds={args.seeds}; RMSE/MAE in score units x100, "
              "mean ± s.e. over seeds\n")
    try:
        budgets = [float(b) for b in (args.budgets or "0.05,0.1").split(",") if b.strip()]
        if args.suite:
            if len(uploads) < 2:
                raise ValueError("--suite needs at least two --scores files")
            shared = sorted(set.intersection(*(set(u.model_names) for u in uploads)))
            mats = [u.values[[u.model_names.index(m) for m in shared]] for u in uploads]
            plan = {m: predictors.get(m, [DEFAULT_PREDICTORS.get(m, "kernel_ridge")]) for m in methods}
            rows = run_suite_backtest(mats, list(args.scores), plan, budgets=budgets, n_reference=args.n_reference,
                                      split=args.split, seeds=args.seeds, level=args.level,
                                      intervals=not args.no_intervals)
            print(f"suite of {len(uploads)} benchmarks, {len(shared)} shared models; " + header)
            for scope in [*args.scores, "overall"]:
                print(f"### {scope}\n")
                print(markdown_table(summarize([r for r in rows if r["scope"] == scope])) + "\n")
            return 0
        for path, upload in zip(args.scores, uploads):
            rows = run_backtest(upload.values, methods, predictors, budgets=budgets, n_reference=args.n_reference,
                                split=args.split, seeds=args.seeds, level=args.level,
                                intervals=not args.no_intervals)
            print(f"{path}: {len(upload.model_names)} models x {len(upload.item_ids)} items, " + header)
            print(markdown_table(summarize(rows)) + "\n")
    except ValueError as exc:
        print(f"evalplan backtest: {exc}", file=sys.stderr)
        return 2
    return 0


def sequential_backtest_command(args: argparse.Namespace, uploads: list[ScoreUpload]) -> int:
    """``evalplan backtest --sequential``: the engine of POST /v1/backtests with sequential: true."""
    table = sequential_backtest.session_estimators()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else list(table)
    unknown = [m for m in methods if m not in table]
    if unknown:
        print(f"evalplan backtest: unknown session method {unknown[0]!r}; one of {list(table)}", file=sys.stderr)
        return 2
    level = 0.95 if args.level is None else args.level
    try:
        budgets = [int(b) for b in (args.budgets or "25,50,100,200").split(",") if b.strip()]
        rules = [StopRule(half_width=float(h), level=level) for h in args.half_widths.split(",") if h.strip()]
        parts = []
        for path, upload in zip(args.scores, uploads):
            for regime in [r.strip() for r in args.regimes.split(",") if r.strip()]:
                out = sequential_backtest.run_sequential_backtest(
                    upload.values, {m: table[m] for m in methods}, regime=regime, n_targets=args.targets,
                    budgets=budgets, stops=rules, level=level, max_items=args.max_items, ref_cap=args.reference_cap)
                setup = out["setup"]
                parts.append(f"### {path}, {regime}: {setup['n_targets']} targets, {setup['n_references']} "
                             f"references, {setup['n_items']} items, sessions of {setup['n_max']} items\n\n"
                             + sequential_backtest.markdown_table(out["rows"], budgets) + "\n")
    except ValueError as exc:
        print(f"evalplan backtest: {exc}", file=sys.stderr)
        return 2
    text = "MAE x100 and coverage of the level interval at n items; items to each stop (censored at the "\
           "session length), reached = fraction of targets that met it, coverage at that stop\n\n" + "\n".join(parts)
    print(text)
    if args.output:
        with open(args.output, "w") as fh:
            fh.write(text)
    return 0
