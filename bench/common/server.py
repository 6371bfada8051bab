"""Start real `evalplan` processes for benchmarks: ``evalplan serve`` on a fresh PostgreSQL database (or any
URL), a worker, or this checkout's or a baseline ref's code (``source_tree``): the one launcher of the benches."""

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

from bench.common.shared_data import data_dir
from evalplan.db.migrate import upgrade
from evalplan.kit.db import make_engine

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["ROOT", "cli_module", "cli_process", "data_dir", "drop_database", "free_port", "fresh_database",
           "running_server", "source_tree", "start_server", "stop_server"]
ADMIN_URL = os.environ.get("EVALPLAN_BENCH_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def fresh_database(name: str, src: Path | None = None) -> str:
    """A new, empty database migrated to head: by this checkout's migrations, or, with ``src`` (a
    ``source_tree`` of other code, e.g. a baseline ref), by that code's own ``db upgrade`` (its schema)."""
    admin = make_engine(ADMIN_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    url = make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    if src is None or src.resolve() == ROOT.resolve():
        upgrade(url)
    else:
        module, import_root = cli_module(src)
        subprocess.run([sys.executable, "-m", module, "db", "upgrade"], cwd=src, check=True,
                       env={**os.environ, "EVALPLAN_DATABASE_URL": url, "PYTHONPATH": str(import_root)})
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


def cli_module(src: Path) -> tuple[str, Path]:
    """(the CLI module, the import root) of a source folder: ``evalplan.cli`` under ``src/`` since the package
    moved to a src layout, ``app.cli`` at the top of a checkout of the code before it (a baseline ref)."""
    if (src / "src" / "evalplan").is_dir():
        return "evalplan.cli", src / "src"
    return "app.cli", src


def cli_process(args: list[str], *, src: Path = ROOT, env: dict[str, str] | None = None, log: Path | None = None,
                cwd: Path | None = None, new_session: bool = False) -> subprocess.Popen[bytes]:
    """``python -m <the CLI of src> *args`` with ``src``'s code on the path (``cli_module``), its output appended
    to ``log`` (else inherited); ``new_session``: its own process group (to kill the whole tree)."""
    module, import_root = cli_module(src)
    environment = {**(os.environ if env is None else env), "PYTHONPATH": str(import_root)}
    out = log.open("ab") if log is not None else None
    try:
        return subprocess.Popen([sys.executable, "-m", module, *args], cwd=cwd or src, env=environment, stdout=out,
                                stderr=subprocess.STDOUT if out is not None else None, start_new_session=new_session)
    finally:
        if out is not None:
            out.close()


def start_server(database_url: str, *, src: Path = ROOT, args: tuple[str, ...] = (), log: Path | None = None,
                 cwd: Path | None = None, start_timeout_s: float = 300.0, **env: str) -> tuple[str, subprocess.Popen[bytes]]:
    """(base_url, process) of ``evalplan serve`` on ``database_url`` (embedded jobs: no Redis) once it answers
    ``/health``; ``args`` add serve options (``--workers 4``), ``log`` gets its output (truncated first)."""
    port = free_port()
    environment = {**os.environ, "EVALPLAN_DATABASE_URL": database_url, "HF_HUB_OFFLINE": "1",
                   "EVALPLAN_LOG_LEVEL": "WARNING", **env}
    environment.pop("EVALPLAN_REDIS_URL", None)
    if log is not None:
        log.write_text("")
    proc = cli_process(["serve", "--host", "127.0.0.1", "--port", str(port), *args], src=src, env=environment,
                       log=log, cwd=cwd)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + start_timeout_s  # a deadline, not a count: a loaded machine starts slowly
    while True:
        if proc.poll() is not None:
            tail = log.read_text()[-3000:] if log is not None else ""
            raise RuntimeError(f"server exited with {proc.returncode} before it answered /health\n{tail}")
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return base, proc
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            stop_server(proc)
            raise RuntimeError(f"server did not answer /health within {start_timeout_s:.0f} s"
                               + (f"; see {log}" if log is not None else ""))
        time.sleep(0.2)


def stop_server(proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    """Terminate ``proc`` (SIGTERM, then SIGKILL after ``timeout_s``)."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def running_server(database_url: str, src: Path = ROOT, start_timeout_s: float = 300.0,
                   **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Yield (base_url, process) of `evalplan serve` (one uvicorn process) until the block ends; ``src`` is
    the source folder to run (this checkout, or a ``source_tree`` of the previous code)."""
    base, proc = start_server(database_url, src=src, start_timeout_s=start_timeout_s, **env)
    try:
        yield base, proc
    finally:
        stop_server(proc)


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

