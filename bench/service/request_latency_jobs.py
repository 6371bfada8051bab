"""Request latency while jobs run, embedded mode (issue 34: "a request must not wait on a job").

    nice -n 10 python -m bench.service.request_latency_jobs [--seconds 120] [--write docs/PERFORMANCE.md]

A fresh SQLite file and ``evalplan serve`` on its embedded defaults (jobs in-process, 2 threads), through HTTP.
The README's workload: MuSR (429 x 756) and HELM Lite MATH (83 x 437) uploaded from the shared data, then two
backtests, a budget plan and an mRMR coreset started (jobs). While they run, a client loops: create a session on
MuSR, post one observation, view the benchmark page (the first view after the upload) and the leaderboard of both.
Reported per request: count, median, max, and failures (any status >= 500). Issue 34 measured ~30 s for a
session create and an observation, and 503s after 4-28 s for the page, in this mode.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench.common.markdown_sections import write_section
from bench.service.leaderboard_bench import data_dir

START, END = "<!-- request-latency-jobs -->", "<!-- /request-latency-jobs -->"
JOBS = [("/v1/backtests", {"benchmarks": "musr", "methods": ["random", "mrmr"], "budgets": [0.1], "seeds": 2}),
        ("/v1/backtests", {"benchmarks": "math", "methods": ["random", "mrmr"], "budgets": [0.1], "seeds": 2}),
        ("/v1/plans", {"benchmarks": ["musr"], "half_width": 0.03, "methods": ["random", "mrmr"]}),
        ("/v1/coresets", {"method": "mrmr", "benchmarks": ["musr"], "budget": {"fraction": 0.1},
                          "reference_models": "all"})]


def call(url: str, method: str, path: str, body: object = None, ctype: str = "application/json",
         ) -> tuple[int, float, bytes]:
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"content-type": ctype} if data is not None else {})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.status, time.perf_counter() - started, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, time.perf_counter() - started, exc.read()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=120.0, help="stop the client loop after this long")
    ap.add_argument("--port", type=int, default=8792)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    url = f"http://127.0.0.1:{args.port}"
    latencies: dict[str, list[tuple[int, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "EVALPLAN_DATABASE_URL": f"sqlite:///{Path(tmp) / 'evalplan.db'}", "HF_HUB_OFFLINE": "1"}
        env.pop("EVALPLAN_REDIS_URL", None)
        subprocess.run([sys.executable, "-m", "evalplan.cli", "db", "upgrade"], env=env, check=True,
                       capture_output=True)
        server = subprocess.Popen([sys.executable, "-m", "evalplan.cli", "serve", "--port", str(args.port)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(240):
                try:
                    if call(url, "GET", "/health")[0] == 200:
                        break
                except OSError:
                    time.sleep(0.5)
            for name, folder in (("musr", "openllm_v2_musr"), ("math", "helm_lite_math")):
                call(url, "POST", "/v1/benchmarks", {"name": name, "capability": "reasoning", "score_kind": "binary"})
                status, _, _ = call(url, "POST", f"/v1/benchmarks/{name}/scores",
                                    (data_dir() / folder / "scores.csv").read_bytes(), "text/csv")
                assert status == 200, status
            jobs = [json.loads(call(url, "POST", path, body)[2])["job"]["id"] for path, body in JOBS]
            started, n = time.monotonic(), 0
            while time.monotonic() - started < args.seconds:
                statuses = [json.loads(call(url, "GET", f"/v1/jobs/{j}")[2])["status"] for j in jobs]
                if all(s in ("succeeded", "failed", "cancelled") for s in statuses):
                    break
                status, seconds, out = call(url, "POST", "/v1/sessions", {
                    "benchmark": "musr", "target": f"bench-{n}", "stop": {"half_width": 0.05}})
                latencies.setdefault("POST /v1/sessions", []).append((status, seconds))
                if status == 201:
                    session = json.loads(out)
                    status, seconds, _ = call(url, "POST", f"/v1/sessions/{session['id']}/observations", {
                        "observations": [{"item": session["next_items"][0], "score": 1}]})
                    latencies.setdefault("POST /v1/sessions/{id}/observations", []).append((status, seconds))
                page = "/ui/benchmarks/musr" if n == 0 else "/ui/benchmarks/math"
                latencies.setdefault("GET /ui/benchmarks/{b} (first view of musr, then math)", []).append(
                    call(url, "GET", page)[:2])
                latencies.setdefault("GET /v1/leaderboard?benchmarks=musr,math", []).append(
                    call(url, "GET", "/v1/leaderboard?benchmarks=musr,math")[:2])
                n += 1
                print(f"{time.monotonic() - started:.0f} s {statuses} "
                      + ", ".join(f"{k.split()[1]}={v[-1][0]}/{v[-1][1]:.2f}" for k, v in latencies.items()),
                      flush=True)
            final = [json.loads(call(url, "GET", f"/v1/jobs/{j}")[2])["status"] for j in jobs]
        finally:
            server.terminate()  # a graceful stop waits for the running jobs: killed after 30 s
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(30)
    table = render(latencies, final, args)
    print(table)
    if args.write:
        write_section(args.write, table, START, END)
    return 0


def render(latencies: dict[str, list[tuple[int, float]]], final: list[str], args: argparse.Namespace) -> str:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    rows = []
    for name, values in latencies.items():
        seconds = [s for _, s in values]
        failures = sum(1 for status, _ in values if status >= 500)
        rows.append(f"| `{name}` | {len(values)} | {statistics.median(seconds):.3f} s | {max(seconds):.3f} s | "
                    f"{failures} |")
    return "\n".join([
        START,
        "### Requests while jobs run (SQLite, embedded mode, through HTTP)",
        "",
        f"`python -m bench.service.request_latency_jobs --write docs/PERFORMANCE.md` (machine: {machine}): MuSR and "
        "HELM Lite MATH uploaded, two backtests, a plan and an mRMR coreset running in the server's 2 job threads "
        f"while one client loops over the requests below (at most {args.seconds:g} s; the jobs ended: "
        f"{', '.join(final)}). Issue 34 measured ~30 s for a session create and an observation and 503s after "
        "4-28 s for the benchmark page in this mode. Load average when the table was written: " +
        f"{os.getloadavg()[0]:.1f} (other work shares these cores; compare rows of one table only).",
        "",
        "| request | n | median | max | 5xx |",
        "|---|---|---|---|---|",
        *rows,
        END,
    ])


if __name__ == "__main__":
    raise SystemExit(main())
