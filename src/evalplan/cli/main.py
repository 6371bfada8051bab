"""The ``evalplan`` parser, built from each command module's ``add_parser`` in the order ``--help`` lists the
commands, and the dispatch to the command's function. Nothing here is imported lazily: the command modules keep
their heavy imports inside their commands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from evalplan.cli import admin, backtest, db, plan, run, serve, session, worker

#: the subcommands in ``--help``'s order, each with its function
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": serve.serve_command,
    "worker": worker.worker_command,
    "db": db.db_command,
    "session": session.session_command,
    "run": run.run_lm_eval_command,
    "admin": admin.admin_command,
    "backtest": backtest.backtest_command,
    "plan": plan.plan_command,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalplan", description="Evalplan evaluation-planning service.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (serve, worker, db, session, run, admin, backtest, plan):
        module.add_parser(sub)
    return parser


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
    command = COMMANDS.get(args.command)
    return command(args) if command is not None else 2
