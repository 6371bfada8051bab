"""Bring up PostgreSQL and Redis for the test suite.

Order: use the servers at EVALPLAN_TEST_DATABASE_URL / EVALPLAN_TEST_REDIS_URL
(defaults on 127.0.0.1) when reachable; otherwise start throwaway ones in a
temporary folder when their binaries are installed (PostgreSQL as a non-root
user); otherwise fail with a one-line install hint. Never skip.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"
INSTALL_HINT = (
    "Evalplan tests need PostgreSQL and Redis: start them (or set EVALPLAN_TEST_DATABASE_URL / "
    "EVALPLAN_TEST_REDIS_URL), or install the binaries: apt-get install postgresql redis-server"
)


class ServicesUnavailable(RuntimeError):
    pass


def _reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=2):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _find_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


@dataclass
class Services:
    admin_pg_url: str
    redis_url: str
    cleanups: list = field(default_factory=list)

    def stop(self) -> None:
        for cleanup in reversed(self.cleanups):
            try:
                cleanup()
            except Exception:  # noqa: BLE001 - best effort teardown
                pass


def _start_postgres(services: Services) -> str:
    initdb, pg_ctl = _find_binary("initdb"), _find_binary("pg_ctl")
    if not (initdb and pg_ctl):
        raise ServicesUnavailable(INSTALL_HINT)
    folder = tempfile.mkdtemp(prefix="evalplan-pg-")
    user_prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        user = "postgres" if _user_exists("postgres") else "nobody"
        shutil.chown(folder, user=user)
        os.chmod(folder, 0o700)
        user_prefix = ["runuser", "-u", user, "--"]
    port = _free_port()
    data = os.path.join(folder, "data")
    subprocess.run([*user_prefix, initdb, "-D", data, "-U", "postgres", "--auth=trust"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([*user_prefix, pg_ctl, "-D", data, "-o", f"-p {port} -k {folder} -c listen_addresses=127.0.0.1",
                    "-l", os.path.join(folder, "log"), "-w", "start"], check=True, stdout=subprocess.DEVNULL)
    services.cleanups.append(lambda: (subprocess.run([*user_prefix, pg_ctl, "-D", data, "-m", "fast", "stop"],
                                                     stdout=subprocess.DEVNULL), shutil.rmtree(folder, True)))
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _start_redis(services: Services) -> str:
    binary = shutil.which("redis-server")
    if not binary:
        raise ServicesUnavailable(INSTALL_HINT)
    folder = tempfile.mkdtemp(prefix="evalplan-redis-")
    port = _free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", folder], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/15"
    for _ in range(100):
        if _reachable(url, 6379):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise ServicesUnavailable("redis-server did not start; " + INSTALL_HINT)
    services.cleanups.append(lambda: (proc.terminate(), proc.wait(10), shutil.rmtree(folder, True)))
    return url


def bring_up() -> Services:
    pg_url = os.environ.get("EVALPLAN_TEST_DATABASE_URL", DEFAULT_PG_URL)
    redis_url = os.environ.get("EVALPLAN_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    services = Services(pg_url, redis_url)
    try:
        if not _reachable(pg_url, 5432):
            services.admin_pg_url = _start_postgres(services)
        if not _reachable(redis_url, 6379):
            services.redis_url = _start_redis(services)
    except Exception:
        services.stop()
        raise
    services.redis_url = redis_db_of_this_worker(services.redis_url)
    return services


def redis_db_of_this_worker(url: str) -> str:
    """Under pytest-xdist (``-n 2``) each worker flushes its own Redis database: the configured one for
    ``gw0``, one below it for ``gw1``, ... (modulo Redis' 16); without xdist the URL as configured."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url
    parts = urlsplit(url)
    base = int(parts.path.lstrip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(base - int(worker[2:])) % 16}"))
