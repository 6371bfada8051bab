"""The ``evalplan`` command: ``serve``, ``worker``, ``db upgrade``, ``admin`` (teams and tokens, in the
database), ``session`` (a CI client), ``run lm-eval`` (a session or coreset evaluated through lm-eval's Python API),
``backtest`` (offline coreset backtest on wide score CSVs, one by one or as a suite) and ``plan`` (the
budget planner on wide score CSVs); the last two need no server or database."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from evalplan.core.sequential.config import METHODS
from evalplan.core.sequential.stopping import DEFAULT_LEVEL
from evalplan.kit.settings import get_settings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalplan", description="Evalplan evaluation-planning service.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP API (applies migrations first in embedded SQLite mode)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    serve.add_argument("--no-migrate", action="store_true", help="do not apply migrations on start")

    worker = sub.add_parser("worker", help="run a Celery worker (needs EVALPLAN_REDIS_URL)")
    worker.add_argument("--queues", default="cpu,gpu", help="comma-separated queues among cpu,gpu")
    worker.add_argument("--concurrency", type=int, default=None)
    worker.add_argument("--pool", default="prefork", choices=["prefork", "solo", "threads"])

    db = sub.add_parser("db", help="database administration")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_sub.add_parser("upgrade", help="apply Alembic migrations")
    upgrade.add_argument("revision", nargs="?", default="head")

    session = sub.add_parser("session", help="drive a sequential evaluation session on a running server")
    session.add_argument("--url", default=os.environ.get("EVALPLAN_URL", "http://127.0.0.1:8000"),
                         help="server base URL (default $EVALPLAN_URL or http://127.0.0.1:8000)")
    session_sub = session.add_subparsers(dest="session_command", required=True)
    create = session_sub.add_parser("create", help="start a session and print it as JSON")
    create.add_argument("--benchmark", required=True)
    create.add_argument("--target", required=True, help="the evaluated model's name")
    create.add_argument("--reference-models", default=None,
                        help='comma-separated model names, or "all" (default: all but the target)')
    create.add_argument("--method", default=None, choices=list(METHODS))
    create.add_argument("--epsilon1", type=float, default=None)
    create.add_argument("--epsilon2", type=float, default=None)
    create.add_argument("--window", type=int, default=None)
    create.add_argument("--refit-every", type=int, default=None)
    create.add_argument("--max-items", type=int, default=None)
    create.add_argument("--batch-size", type=int, default=None)
    create.add_argument("--seed", type=int, default=None)
    create.add_argument("--stop-half-width", type=float, default=None,
                        help="stop once the --level interval's half-width is at most this (score units)")
    create.add_argument("--level", type=float, default=None, help="the interval's level (default 0.95)")
    create.add_argument("--previous", default=None, help="comma-separated earlier checkpoints (oldest first)")
    observe = session_sub.add_parser("observe", help="post one score and print the updated session")
    observe.add_argument("session_id")
    observe.add_argument("item")
    observe.add_argument("score", type=float)
    show = session_sub.add_parser("show", help="print a session as JSON")
    show.add_argument("session_id")
    for p in (session, create, observe, show):
        p.add_argument("--token", default=argparse.SUPPRESS if p is not session else os.environ.get("EVALPLAN_TOKEN"),
                       help="bearer token (default $EVALPLAN_TOKEN)")
    for p in (create, observe, show):
        p.add_argument("--url", default=argparse.SUPPRESS, help="server base URL")

    run = sub.add_parser("run", help="run a harness against a session or a coreset on a running server")
    run_sub = run.add_subparsers(dest="run_command", required=True)
    lm = run_sub.add_parser("lm-eval", help="evaluate the proposed doc ids with lm-evaluation-harness's Python API "
                                            "(pip install 'evalplan[lm-eval]')")
    lm.add_argument("--tasks", required=True, help="the lm-eval task (one for a session; a comma list for --coreset)")
    lm.add_argument("--model", required=True, help="lm-eval model type (hf, dummy, ...)")
    lm.add_argument("--model_args", "--model-args", dest="model_args", default="",
                    help="lm-eval model arguments, e.g. pretrained=gpt2,dtype=float32")
    lm.add_argument("--benchmark", default=None, help="the Evalplan benchmark (default: the task name)")
    lm.add_argument("--target", default=None, help="the evaluated model's name in Evalplan (required for a session)")
    lm.add_argument("--coreset", default=None, help="evaluate this static coreset instead and print its predictions")
    lm.add_argument("--stop-half-width", type=float, default=None, help="stop once the interval half-width <= H")
    lm.add_argument("--level", type=float, default=None, help="interval level of the stop rule (default 0.95)")
    lm.add_argument("--max-items", type=int, default=None)
    lm.add_argument("--batch-size", type=int, default=None, help="items the session proposes per batch")
    lm.add_argument("--method", default=None, help="session method (default: the service's recommended one)")
    lm.add_argument("--reference-models", default=None, help='comma-separated names, or "all"')
    lm.add_argument("--seed", type=int, default=None)
    lm.add_argument("--metric", default=None, help="lm-eval metric (default: the task's first)")
    lm.add_argument("--filter", default="none", help="lm-eval filter (default none)")
    lm.add_argument("--include-path", default=None, help="folder of extra lm-eval task YAMLs")
    lm.add_argument("--output-path", default=None, help="write lm-eval's samples_<task>_<date>.jsonl here")
    lm.add_argument("--lm-batch-size", default=None, help="lm-eval model batch size")
    lm.add_argument("--device", default=None)
    lm.add_argument("--url", default=os.environ.get("EVALPLAN_URL", "http://127.0.0.1:8000"))
    lm.add_argument("--token", default=None, help="API token (default $EVALPLAN_TOKEN)")
    lm.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    admin = sub.add_parser("admin", help="teams and tokens, directly in the database (operators)")
    admin_sub = admin.add_subparsers(dest="admin_command", required=True)
    team = admin_sub.add_parser("create-team", help="create a team and print it as JSON")
    team.add_argument("name")
    token = admin_sub.add_parser("create-token", help="issue a token of a team and print it (shown only once)")
    token.add_argument("team", help="team name or id")
    token.add_argument("--scopes", default="read,write", help="comma-separated among read, write, admin")
    token.add_argument("--name", default=None, help="what the token is for (default: <team>-<scopes>)")
    token.add_argument("--expires-at", default=None, help="ISO 8601 instant after which the token answers 401")
    drop = admin_sub.add_parser("delete-team", help="delete a team with everything it owns (refused while a "
                                                    "published coreset, another team or a running job depends on it)")
    drop.add_argument("team", help="team name or id")
    revoke = admin_sub.add_parser("revoke-token", help="revoke a token by id")
    revoke.add_argument("team", help="team name or id")
    revoke.add_argument("token_id")

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
                         "(evalplan.core.sequential_backtest), like POST /v1/backtests with sequential: true")
    bt.add_argument("--regimes", default="interpolation", help="--sequential: interpolation and/or extrapolation")
    bt.add_argument("--targets", type=int, default=20, help="--sequential: held-out targets per regime")
    bt.add_argument("--half-widths", default="0.02",
                    help="--sequential: comma-separated stop half-widths whose items to stop are reported")
    bt.add_argument("--max-items", type=int, default=None,
                    help="--sequential: items per replayed session (default max(largest budget, 30%% of items))")
    bt.add_argument("--reference-cap", type=int, default=100, help="--sequential: at most this many references")
    bt.add_argument("--output", default=None, help="--sequential: also write the markdown tables to this file")
    bt.add_argument("--no-intervals", action="store_true", help="skip the conformal coverage column")
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
    pl.add_argument("--json", action="store_true", help="print the plan as JSON (the job result's layout)")
    return parser


def sequential_backtest_command(args: argparse.Namespace, uploads: list[Any]) -> int:
    """``evalplan backtest --sequential``: the engine of POST /v1/backtests with sequential: true."""
    from evalplan.core.sequential.stopping import StopRule
    from evalplan.core.sequential_backtest import markdown_table, run_sequential_backtest, session_estimators

    table = session_estimators()
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
                out = run_sequential_backtest(upload.values, {m: table[m] for m in methods}, regime=regime,
                                              n_targets=args.targets, budgets=budgets, stops=rules, level=level,
                                              max_items=args.max_items, ref_cap=args.reference_cap)
                setup = out["setup"]
                parts.append(f"### {path}, {regime}: {setup['n_targets']} targets, {setup['n_references']} "
                             f"references, {setup['n_items']} items, sessions of {setup['n_max']} items\n\n"
                             + markdown_table(out["rows"], budgets) + "\n")
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


def plan_command(args: argparse.Namespace) -> int:
    import numpy as np

    from evalplan.benchmarks.score_formats import parse_wide_csv
    from evalplan.core.planner import (
        DEFAULT_CANDIDATES,
        DEFAULT_FRACTIONS,
        parse_candidate,
        plan_benchmark,
        plan_suite,
    )
    from evalplan.core.score_scale import ScoreScale
    from evalplan.kit.errors import InvalidInput
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
            plans[path] = json_safe(plan_benchmark(
                values, args.half_width, args.level, candidates, fractions, args.seeds,
                score_range=(0.0, 1.0) if in_unit else (None, None), max_seconds=args.max_seconds))
    except (OSError, InvalidInput, ValueError) as exc:
        print(f"evalplan plan: {exc}", file=sys.stderr)
        return 2
    suite = plan_suite(plans)
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
    return 0


def backtest_command(args: argparse.Namespace) -> int:
    from evalplan.benchmarks.score_formats import parse_wide_csv
    from evalplan.core.backtest import DEFAULT_PREDICTOR as DEFAULT_PREDICTORS
    from evalplan.core.backtest import markdown_table, run_backtest, summarize
    from evalplan.core.score_scale import ScoreScale
    from evalplan.core.suite_backtest import run_suite_backtest
    from evalplan.kit.errors import InvalidInput

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


def session_command(args: argparse.Namespace) -> int:
    from evalplan.client import EvalplanClient, EvalplanError

    client = EvalplanClient(args.url, token=getattr(args, "token", None))
    try:
        if args.session_command == "create":
            refs = args.reference_models
            if refs is not None and refs != "all":
                refs = [r.strip() for r in refs.split(",") if r.strip()]
            result = client.create_session(
                args.benchmark, args.target, reference_models=refs, method=args.method, epsilon1=args.epsilon1,
                epsilon2=args.epsilon2, window=args.window, refit_every=args.refit_every,
                max_items=args.max_items, batch_size=args.batch_size, seed=args.seed,
                stop=None if args.stop_half_width is None else {"half_width": args.stop_half_width},
                level=args.level,
                previous=[p.strip() for p in args.previous.split(",") if p.strip()] if args.previous else None)
        elif args.session_command == "observe":
            result = client.observe(args.session_id, args.item, args.score)
        else:
            result = client.get_session(args.session_id)
    except EvalplanError as exc:
        print(f"evalplan session: {exc}", file=sys.stderr)
        if exc.problem:
            print(json.dumps(exc.problem, indent=2), file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"evalplan session: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    return 0


def run_lm_eval_command(args: argparse.Namespace) -> int:
    """``evalplan run lm-eval``: progress on stderr, the final session (or coreset prediction) as JSON on stdout."""
    from evalplan.client import EvalplanClient, EvalplanError

    try:
        from evalplan.integrations import lm_eval_runner
    except ImportError as exc:
        print(f"evalplan run lm-eval: {exc}; install it with pip install 'evalplan[lm-eval]'", file=sys.stderr)
        return 2
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if args.coreset is None and (len(tasks) != 1 or not args.target):
        print("evalplan run lm-eval: a session needs exactly one --tasks task and --target", file=sys.stderr)
        return 2
    client = EvalplanClient(args.url, token=args.token)
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        print("evalplan run lm-eval: lm-eval is not installed: pip install 'evalplan[lm-eval]'", file=sys.stderr)
        return 2
    runner = lm_eval_runner.LmEvalRunner(args.model, args.model_args, include_path=args.include_path,
                                         output_path=args.output_path, metric=args.metric, filter_name=args.filter,
                                         batch_size=args.lm_batch_size, device=args.device)
    try:
        if args.coreset is not None:
            result = lm_eval_runner.run_coreset(client, runner, coreset=args.coreset, tasks=tasks or None,
                                                model=args.target)
        else:
            fields: dict[str, object] = {}
            if args.stop_half_width is not None:
                fields["stop"] = {"half_width": args.stop_half_width,
                                  **({"level": args.level} if args.level is not None else {})}
            refs = args.reference_models
            if refs is not None and refs != "all":
                refs = [r.strip() for r in refs.split(",") if r.strip()]
            for key, value in (("max_items", args.max_items), ("batch_size", args.batch_size),
                               ("method", args.method), ("reference_models", refs), ("seed", args.seed)):
                if value is not None:
                    fields[key] = value
            result = lm_eval_runner.run_session(client, runner, task=tasks[0], benchmark=args.benchmark or tasks[0],
                                                target=args.target, session_fields=fields,
                                                progress_bar=not args.no_progress)
            result = {**result, "lm_eval_calls": runner.n_calls}
    except EvalplanError as exc:
        print(f"evalplan run lm-eval: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"evalplan run lm-eval: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    return 0


def admin_command(args: argparse.Namespace) -> int:
    """Teams and tokens straight in the database (``evalplan admin ...``), audited as ``cli admin``."""
    from datetime import datetime

    from evalplan.auth import teams as team_service
    from evalplan.auth.caller import Caller
    from evalplan.auth.scoping import bind_caller
    from evalplan.kit.db import make_engine, make_session_factory
    from evalplan.kit.errors import EvalplanError

    engine = make_engine(get_settings().database_url)
    operator = Caller(actor="cli admin", superuser=True)
    try:
        with make_session_factory(engine)() as session:
            bind_caller(session, operator)
            if args.admin_command == "delete-team":
                from evalplan.auth.deletion import write_first

                write_first(session)  # SQLite: hold the write lock before the deletion's reads
            if args.admin_command == "create-team":
                row = team_service.create_team(session, args.name)
                session.commit()
                result: dict[str, object] = {"id": row.id, "name": row.name}
            else:
                team = team_service.get_team(session, args.team, operator)
                if args.admin_command == "delete-team":
                    import evalplan.benchmark_selections.repository
                    import evalplan.benchmarks.service
                    import evalplan.coresets.repository
                    import evalplan.models.service
                    import evalplan.sessions.cache
                    import evalplan.sessions.repository  # noqa: F401 - these register their parts of a team deletion
                    from evalplan.auth.deletion import delete_team

                    counts = delete_team(session, team)
                    session.commit()
                    result = {"id": team.id, "name": team.name, "deleted": True, **counts}
                elif args.admin_command == "revoke-token":
                    team_service.revoke_token(session, team, args.token_id)
                    session.commit()
                    result = {"id": args.token_id, "revoked": True}
                else:
                    scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
                    expires = datetime.fromisoformat(args.expires_at.replace("Z", "+00:00")) if args.expires_at \
                        else None
                    row_token, secret = team_service.create_token(
                        session, team, name=args.name or f"{team.name}-{'-'.join(scopes)}", scopes=scopes,
                        expires_at=expires)
                    session.commit()
                    result = {"id": row_token.id, "team": team.name, "name": row_token.name,
                              "scopes": row_token.scopes, "token": secret}
    except EvalplanError as exc:
        print(f"evalplan admin: {exc.detail}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"evalplan admin: {exc}", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
    print(json.dumps(result, indent=2))
    return 0


@contextmanager
def shared_metrics_folder(workers: int) -> Iterator[None]:
    """With several uvicorn workers, a folder for prometheus-client's multiprocess mode (so that
    ``/metrics`` sums every worker's HTTP metrics, evalplan.kit.observability), unless
    ``PROMETHEUS_MULTIPROC_DIR`` names one already; removed when the server stops."""
    if workers <= 1 or os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        yield
        return
    folder = tempfile.mkdtemp(prefix="evalplan-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
    try:
        yield
    finally:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """The ``evalplan`` command. Output piped into a reader that exits early (``| head``) ends the
    command quietly (status 141, as a shell reports SIGPIPE) instead of a BrokenPipeError traceback."""
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python flushes stdout at exit: into /dev/null, not the closed pipe
        return 141


def _main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return run_lm_eval_command(args)
    if args.command == "admin":
        return admin_command(args)
    if args.command == "session":
        return session_command(args)
    if args.command == "backtest":
        return backtest_command(args)
    if args.command == "plan":
        return plan_command(args)
    settings = get_settings()
    if args.command == "db":
        from evalplan.db.migrate import upgrade

        upgrade(settings.database_url, args.revision)
        print(f"database at revision {args.revision}")
        return 0
    if args.command == "serve":
        import uvicorn

        if settings.is_sqlite and not args.no_migrate:
            from evalplan.db.migrate import upgrade

            upgrade(settings.database_url)
        # the app logs (JSON lines, one access line per request with its id: evalplan.kit.observability);
        # uvicorn's own loggers propagate to that root handler
        with shared_metrics_folder(args.workers):
            uvicorn.run("evalplan.main:create_app", factory=True, host=args.host, port=args.port,
                        workers=args.workers, log_level=settings.log_level.lower(), log_config=None,
                        access_log=False, timeout_worker_healthcheck=settings.serve_worker_healthcheck_timeout_s)
        return 0
    if args.command == "worker":
        queues = [q.strip() for q in args.queues.split(",") if q.strip()]
        unknown = set(queues) - {"cpu", "gpu"}
        if unknown or not queues:
            print(f"evalplan worker: unknown queues {sorted(unknown)}; choose among cpu,gpu", file=sys.stderr)
            return 2
        if not settings.uses_celery:
            print("evalplan worker: set EVALPLAN_REDIS_URL (without it, jobs run inside `evalplan serve`)",
                  file=sys.stderr)
            return 2
        from evalplan.workers.celery_app import celery_app

        concurrency = args.concurrency or settings.worker_concurrency
        celery_app.worker_main([
            "worker", "-Q", ",".join(queues), "--concurrency", str(concurrency), "--pool", args.pool,
            "--loglevel", settings.log_level.upper(), "--without-gossip", "--without-mingle",
        ])
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
