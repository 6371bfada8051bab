"""The ``evalplan`` command, one module per subcommand (the layout of inspect_ai's ``_cli/``): ``main.py`` builds the
parser from each command module's ``add_parser`` and dispatches to its ``*_command``.

- ``serve.py``: ``serve``, the HTTP API (migrations first in embedded SQLite mode);
- ``worker.py``: ``worker``, a Celery worker;
- ``db.py``: ``db upgrade``, the Alembic migrations;
- ``admin.py``: ``admin``, teams and tokens, directly in the database;
- ``session.py``: ``session``, a CI client of a running server;
- ``run.py``: ``run lm-eval``, a session or coreset evaluated through lm-eval's Python API;
- ``backtest.py``: ``backtest``, the offline coreset backtest on wide score CSVs, one by one or as a suite;
- ``plan.py``: ``plan``, the budget planner on wide score CSVs.

The last two need no server or database. ``main.py`` imports every command module to build the parser, so a
command module imports at its top only what ``evalplan --help`` may load; what is heavy (the web app, the
database, scikit-learn, uvicorn, Celery, lm-eval) it imports inside its command, which each module's docstring
names.
"""

from evalplan.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
