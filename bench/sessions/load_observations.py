"""Load on the observation path (issue 13, failure 8): locust drives 8 clients, each looping over its own
MuSR session on PostgreSQL (`evalplan serve --workers N`), posting one observation per request.

    nice -n 10 python -m bench.sessions.load_observations --workers 1 2 --seconds 30 --write docs/PERFORMANCE.md

Setup (not timed): a fresh database, the binary benchmark ``openllm_v2_musr`` (429 models x 756 items,
read in place from EVALPLAN_DATA_DIR, default ../shared/data). Client k evaluates model k of the CSV;
every session's references are the other 421 models (one shared prior). A client posts ``{item, score}``
for ``next_items[0]`` with its model's true score and starts a new session when one stops. Reported from
locust's statistics of the ``observation`` requests only: throughput, p50, p99, errors.
Goal: >= 150 posts/s, p50 <= 30 ms, p99 <= 250 ms, 0 errors.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from bench.common.markdown_sections import write_section
from bench.common.server import fresh_database, source_tree, start_server
from bench.common.shared_data import data_dir

START, END = "<!-- observation-load -->", "<!-- /observation-load -->"
DATASET = "openllm_v2_musr"
CLIENTS = 8

LOCUSTFILE = '''
import csv, os, random
from locust import HttpUser, task, constant
from locust.exception import StopUser

with open(os.environ["LOAD_SCORES"]) as fh:
    rows = list(csv.reader(fh))
ITEMS = rows[0][1:]
TRUTH = {r[0]: dict(zip(ITEMS, r[1:])) for r in rows[1:]}
TARGETS = [r[0] for r in rows[1:1 + int(os.environ["LOAD_CLIENTS"])]]
REFERENCES = [r[0] for r in rows[1 + int(os.environ["LOAD_CLIENTS"]):]]
SESSIONS = os.environ["LOAD_SESSIONS"].split(",")
COUNTER = {"n": 0}


class Evaluator(HttpUser):
    wait_time = constant(0)

    def on_start(self):
        k = COUNTER["n"] % len(TARGETS)
        COUNTER["n"] += 1
        self.target = TARGETS[k]
        # the bench created each client's first session before the timed run (not in the figures)
        r = self.client.get(f"/v1/sessions/{SESSIONS[k]}", name="read")
        if r.status_code != 200:
            raise StopUser()
        self.session = r.json()

    def new_session(self):
        body = {"benchmark": "musr", "target": self.target, "reference_models": REFERENCES}
        method = os.environ.get("LOAD_METHOD")
        if method:
            body["method"] = method
        r = self.client.post("/v1/sessions", json=body, name="create")
        if r.status_code != 201:
            raise StopUser()
        self.session = r.json()

    @task
    def observe(self):
        s = self.session
        if s["status"] != "active" or not s.get("next_items"):
            self.new_session()
            return
        item = s["next_items"][0]
        score = float(TRUTH[self.target][item])
        with self.client.post(f"/v1/sessions/{s['id']}/observations", json={"item": item, "score": score},
                              name="observation", catch_response=True) as r:
            if r.status_code == 200:
                self.session = r.json()
                r.success()
            else:
                r.failure(f"{r.status_code} {r.text[:200]}")
                self.new_session()
'''


def cpu_seconds(root_pid: int) -> float:
    """User + system CPU seconds of a process and its children (uvicorn workers), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = [root_pid]
    try:
        pids += [int(p) for p in Path(f"/proc/{root_pid}/task/{root_pid}/children").read_text().split()]
    except OSError:
        pass
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def run(workers: int, seconds: int, method: str | None, label: str, ref: str | None) -> dict[str, Any]:
    scores = data_dir() / DATASET / "scores.csv"
    names = [row[0] for row in csv.reader(scores.open())][1:]
    body = {"benchmark": "musr", "reference_models": names[CLIENTS:], **({"method": method} if method else {})}
    with tempfile.TemporaryDirectory() as tmp_dir, source_tree(ref) as src:
        url = fresh_database("evalplan_bench_load", src)  # migrated by the code under test (its own schema)
        tmp = Path(tmp_dir)
        base, proc = start_server(url, src=src, args=("--workers", str(workers)),
                                  log=Path(tempfile.gettempdir()) / f"evalplan_load_server_{workers}.log")
        try:
            with httpx.Client(base_url=base, timeout=300) as client:
                assert client.post("/v1/benchmarks", json={"name": "musr", "score_kind": "binary"}).status_code == 201
                r = client.post("/v1/benchmarks/musr/scores", content=scores.read_bytes(),
                                headers={"content-type": "text/csv"})
                assert r.status_code == 200, r.text
                # not timed: the shared prior (first create) and each client's first session
                sessions = []
                for k in range(CLIENTS):
                    r = client.post("/v1/sessions", json={**body, "target": names[k]})
                    assert r.status_code == 201, r.text
                    sessions.append(r.json()["id"])
            (tmp / "locustfile.py").write_text(LOCUSTFILE)
            env = {**os.environ, "LOAD_SCORES": str(scores), "LOAD_CLIENTS": str(CLIENTS),
                   "LOAD_METHOD": method or "", "LOAD_SESSIONS": ",".join(sessions)}
            cpu0 = cpu_seconds(proc.pid)
            subprocess.run([sys.executable, "-m", "locust", "-f", str(tmp / "locustfile.py"), "--headless",
                            "-u", str(CLIENTS), "-r", str(CLIENTS), "-t", f"{seconds}s", "--host", base,
                            "--csv", str(tmp / "load"), "--only-summary", "--loglevel", "WARNING"],
                           env=env, check=False, cwd=tmp, timeout=seconds + 300)
            cpu = cpu_seconds(proc.pid) - cpu0
            load = os.getloadavg()[0]
            if not (tmp / "load_stats.csv").exists():
                raise RuntimeError("locust wrote no statistics (is it installed? pip install -e '.[bench]')")
            with (tmp / "load_stats.csv").open() as fh:
                stats = {row["Name"]: row for row in csv.DictReader(fh)}
        finally:
            proc.terminate()
            proc.wait(30)
    obs = stats["observation"]
    create = stats.get("create", {})
    posts = float(obs["Request Count"])
    return {"label": label, "workers": workers, "posts": posts, "errors": float(obs["Failure Count"]),
            "rps": float(obs["Requests/s"]), "p50": float(obs["50%"]), "p99": float(obs["99%"]),
            "creates": float(create.get("Request Count", 0) or 0),
            "create_errors": float(create.get("Failure Count", 0) or 0),
            "cpu_ms": 1000 * cpu / max(posts, 1), "load": load}


def section(rows: list[dict[str, Any]], seconds: int, method: str | None, argv: list[str]) -> str:
    lines = [START, "<!-- written by `python -m bench.sessions.load_observations --write docs/PERFORMANCE.md` -->",
             "### Observation load (PostgreSQL, locust, 8 clients)", "",
             f"`nice -n 10 python -m bench.sessions.load_observations {' '.join(argv)}`. 8 locust clients, each looping over "
             f"its own `{DATASET}` session (429 x 756; references: the other 421 models, one shared prior; "
             f"method `{method or 'default'}`); each client's first session is created before the timed "
             f"{seconds} s (a stopped session is replaced by a new one, timed as `create`); figures are of the "
             "observation posts only. Server CPU = user + system CPU seconds of the `evalplan serve` processes "
             "during the run / posts (less sensitive to the other load than wall times). Load = 1-minute load "
             "average at the end of the row (2 cores shared with other work; the goals are for an idle machine). "
             "Goal: >= 150 posts/s, p50 <= 30 ms, p99 <= 250 ms, 0 errors. Before (issue 13): 44 posts/s, p50 "
             "119 ms, p99 1.2 s.", "",
             "| code | uvicorn workers | posts | posts/s | p50 (ms) | p99 (ms) | errors | server CPU per post (ms) "
             "| sessions created | load |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['workers']:.0f} | {r['posts']:.0f} | {r['rps']:.1f} | {r['p50']:.0f} | "
                     f"{r['p99']:.0f} | {r['errors']:.0f} | {r['cpu_ms']:.1f} | {r['creates']:.0f} | {r['load']:.1f} |")
    base = {r["workers"]: r for r in rows if r["label"] != "this code"}
    ratios = []
    for r in rows:
        old = base.get(r["workers"])
        if r["label"] == "this code" and old is not None:
            ratios.append(f"{r['workers']:.0f} worker(s): posts/s x{r['rps'] / max(old['rps'], 1e-9):.2f}, p50 "
                          f"x{r['p50'] / max(old['p50'], 1e-9):.2f}, server CPU per post "
                          f"x{r['cpu_ms'] / max(old['cpu_ms'], 1e-9):.2f} (this / previous)")
    if ratios:
        lines += ["", "This code vs the previous code in the same run: " + "; ".join(ratios) + "."]
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--method", default=None, help="session method (default: the service's default)")
    parser.add_argument("--baseline", default=None, metavar="GIT_REF",
                        help="also run the previous code (a git ref) with one worker, for ratios in the same run")
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    rows = []
    for w in args.workers:
        if args.baseline and w == 1:  # `--workers N` spawns processes that import this checkout's package
            rows.append(run(w, args.seconds, args.method, f"previous ({args.baseline})", args.baseline))
        rows.append(run(w, args.seconds, args.method, "this code", None))
    text = section(rows, args.seconds, args.method, sys.argv[1:])
    print(text)
    if args.write:
        write_section(args.write, text, START, END)


if __name__ == "__main__":
    main()
