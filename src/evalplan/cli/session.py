"""``evalplan session create|observe|show``: drive a sequential evaluation session on a running server (a CI
client), each answer printed as JSON. It needs only the stdlib client (``evalplan.client``): nothing is imported
inside the command."""

from __future__ import annotations

import argparse
import json
import os
import sys

from evalplan.client import EvalplanClient, EvalplanError
from evalplan.core.sequential.config import METHODS


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def session_command(args: argparse.Namespace) -> int:
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
