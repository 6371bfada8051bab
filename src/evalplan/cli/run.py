"""``evalplan run lm-eval``: evaluate the doc ids a session (or a static coreset) proposes with
lm-evaluation-harness's Python API (``evalplan.integrations.lm_eval_runner``), progress on stderr.

Imported inside the command: ``lm_eval`` itself, an optional extra (``pip install 'evalplan[lm-eval]'``, torch
and transformers behind it), probed before the run so that its absence is a message and status 2."""

from __future__ import annotations

import argparse
import json
import os
import sys

from evalplan.client import EvalplanClient, EvalplanError
from evalplan.integrations import lm_eval_runner


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def run_lm_eval_command(args: argparse.Namespace) -> int:
    """``evalplan run lm-eval``: progress on stderr, the final session (or coreset prediction) as JSON on stdout."""
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
