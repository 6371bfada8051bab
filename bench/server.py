"""Start a real `evalplan serve` process on a fresh PostgreSQL database, for benchmarks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.db.migrate import upgrade
from app.kit.db import make_engine

ROOT = Path(__file__).resolve().parent.parent
ADMIN_URL = os.environ.get("EVALPLAN_BENCH_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def data_dir() -> Path:
    return Path(os.environ.get("EVALPLAN_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


def fresh_database(name: str) -> str:
    admin = make_engine(ADMIN_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    url = make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    upgrade(url)
    return url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drop_database(name: str) -> None:
    admin = make_engine(ADMIN_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


@contextmanager
def running_server(database_url: str, src: Path = ROOT, start_timeout_s: float = 300.0,
                   **env: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """Yield (base_url, process) of `evalplan serve` (one uvicorn process) until the block ends; ``src`` is
    the source folder to run (this checkout, or a ``source_tree`` of the previous code)."""
    port = free_port()
    environment = {**os.environ, "EVALPLAN_DATABASE_URL": database_url, "HF_HUB_OFFLINE": "1",
                   "EVALPLAN_LOG_LEVEL": "WARNING", "PYTHONPATH": str(src), **env}
    environment.pop("EVALPLAN_REDIS_URL", None)
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
                            env=environment, cwd=src)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout_s  # a deadline, not a count: a loaded machine starts slowly
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode} before it answered /health")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not answer /health within {start_timeout_s:.0f} s")
            time.sleep(0.2)
        yield base, proc
    finally:
        proc.terminate()
        proc.wait(20)


@contextmanager
def source_tree(ref: str | None) -> Iterator[Path]:
    """The source folder to run a server from: this checkout (``ref`` None), or a temporary
    detached git worktree of ``ref`` (e.g. the previous code, for a ratio in the same run), removed after."""
    if ref is None:
        yield ROOT
        return
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="evalplan-baseline-")) / "src"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(folder), ref], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], check=False)

