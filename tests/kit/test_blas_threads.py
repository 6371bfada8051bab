"""A serving process computes with one BLAS thread (``evalplan.kit.blas``; issue 34, coreset predict latency):
the app built from settings (what ``evalplan serve`` and its workers run) limits the BLAS libraries, and an
operator's thread variable is kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from evalplan.kit.blas import THREAD_VARIABLES

SCRIPT = """
import os, sys
import numpy  # noqa: F401  (BLAS loaded before the app, as in a server)
from threadpoolctl import threadpool_info
from evalplan.kit.settings import Settings
from evalplan.main import create_app
create_app(Settings(database_url="sqlite:///" + sys.argv[1], redis_url=None))
blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
print(blas, os.environ.get("OPENBLAS_NUM_THREADS"))
"""


def run(tmp_path: Path, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "x.db")], capture_output=True, text=True,
                         env={**base, **env}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_the_served_app_uses_one_blas_thread(tmp_path: Path) -> None:
    blas, variable = run(tmp_path).rsplit(" ", 1)
    assert blas != "[]" and set(blas.strip("[]").split(", ")) == {"1"}, blas  # before: [2, 2] on 2 cores
    assert variable == "1"


def test_an_operators_thread_setting_is_kept(tmp_path: Path) -> None:
    blas, variable = run(tmp_path, OPENBLAS_NUM_THREADS="2").rsplit(" ", 1)
    assert variable == "2" and blas != "[]" and set(blas.strip("[]").split(", ")) == {"2"}, blas
