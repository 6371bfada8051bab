"""`evalplan serve --workers 2` comes up when its worker processes start slowly, as on a loaded machine.

uvicorn's supervisor pings each worker and kills one that has not answered within
``timeout_worker_healthcheck`` (uvicorn's default: 5 s), but a new worker cannot answer before its fresh
interpreter has imported the app: on a loaded machine every worker was killed and respawned in a loop and
the server never came up (the 2-worker load bench, docs/PERFORMANCE.md). ``evalplan serve`` passes
``EVALPLAN_SERVE_WORKER_HEALTHCHECK_TIMEOUT_S`` (default 120 s). Here each worker process is made to start
8 s late (a ``sitecustomize`` that sleeps in multiprocessing's spawned children only).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from support.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
SLOW_START = """
import os, sys, time
if "--multiprocessing-fork" in sys.argv:  # a uvicorn worker (spawned), not the supervisor or the tracker
    with open(os.environ["EVALPLAN_TEST_SPAWN_LOG"], "a") as log:
        log.write(f"{os.getpid()}\\n")
    time.sleep(8)
"""


@pytest.mark.slow
def test_slowly_starting_workers_are_not_killed(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(SLOW_START)
    spawn_log = tmp_path / "spawned.txt"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src")]), "HF_HUB_OFFLINE": "1",
           "EVALPLAN_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}", "EVALPLAN_TEST_SPAWN_LOG": str(spawn_log),
           "EVALPLAN_LOG_LEVEL": "WARNING"}
    for name in ("EVALPLAN_REDIS_URL", "EVALPLAN_SERVE_WORKER_HEALTHCHECK_TIMEOUT_S"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "evalplan.cli", "serve", "--port", str(port), "--workers", "2"],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code
                if status == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        assert status == 200, "evalplan serve --workers 2 did not answer /health"
        spawned = spawn_log.read_text().split()
        assert len(spawned) == 2, f"workers were killed and respawned while starting: {spawned}"
    finally:
        proc.terminate()
        proc.wait(60)
