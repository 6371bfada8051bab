"""Load on the observation path (issue 13, failure 8): locust drives 8 clients, each looping over its own
MuSR session on PostgreSQL (`evalplan serve --workers N`), posting one observation per request.

    nice -n 10 python -m bench.load_observations --workers 1 2 --seconds 30 --write docs/PERFORMANCE.md

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
import time
from pathlib import Path

import httpx

from bench.markdown_sections import write_section
from bench.server import ROOT, free_port, fresh_database

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
COUNTER = {"n": 0}


class Evaluator(HttpUser):
    wait_time = constant(0)

    def on_start(self):
        self.target = TARGETS[COUNTER["n"] % len(TARGETS)]
        COUNTER["n"] += 1
        self.new_session()

    def new_session(self):
        body = {"benchmark": "musr", "target": self.target, "reference_models": REFERENCES, "max_items": 700}
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


def data_dir() -> Path:
    return Path(os.environ.get("EVALPLAN_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


def start_server(database_url: str, workers: int, log: Path) -> tuple[str, subprocess.Popen]:
    port = free_port()
    env = {**os.environ, "EVALPLAN_DATABASE_URL": database_url, "HF_HUB_OFFLINE": "1",
           "EVALPLAN_LOG_LEVEL": "WARNING"}
    env.pop("EVALPLAN_REDIS_URL", None)
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", str(workers)], env=env, cwd=ROOT, stdout=log.open("w"),
                            stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return base, proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError(f"server did not start; see {log}")


def run(workers: int, seconds: int, method: str | None) -> dict[str, float]:
    scores = data_dir() / DATASET / "scores.csv"
    url = fresh_database("evalplan_bench_load")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        base, proc = start_server(url, workers, Path(tempfile.gettempdir()) / f"evalplan_load_server_{workers}.log")
        try:
            with httpx.Client(base_url=base, timeout=300) as client:
                assert client.post("/v1/benchmarks", json={"name": "musr", "score_kind": "binary"}).status_code == 201
                r = client.post("/v1/benchmarks/musr/scores", content=scores.read_bytes(),
                                headers={"content-type": "text/csv"})
                assert r.status_code == 200, r.text
                # warm-up (not timed): the first session computes and stores the shared prior
                names = [row[0] for row in csv.reader(scores.open())][1:]
                r = client.post("/v1/sessions", json={"benchmark": "musr", "target": names[0],
                                                      "reference_models": names[CLIENTS:], "max_items": 700,
                                                      **({"method": method} if method else {})})
                assert r.status_code == 201, r.text
            (tmp / "locustfile.py").write_text(LOCUSTFILE)
            env = {**os.environ, "LOAD_SCORES": str(scores), "LOAD_CLIENTS": str(CLIENTS),
                   "LOAD_METHOD": method or ""}
            subprocess.run([sys.executable, "-m", "locust", "-f", str(tmp / "locustfile.py"), "--headless",
                            "-u", str(CLIENTS), "-r", str(CLIENTS), "-t", f"{seconds}s", "--host", base,
                            "--csv", str(tmp / "load"), "--only-summary", "--loglevel", "WARNING"],
                           env=env, check=False, cwd=tmp, timeout=seconds + 300)
            with (tmp / "load_stats.csv").open() as fh:
                stats = {row["Name"]: row for row in csv.DictReader(fh)}
        finally:
            proc.terminate()
            proc.wait(30)
    obs = stats["observation"]
    create = stats.get("create", {})
    return {"workers": workers, "posts": float(obs["Request Count"]), "errors": float(obs["Failure Count"]),
            "rps": float(obs["Requests/s"]), "p50": float(obs["50%"]), "p99": float(obs["99%"]),
            "creates": float(create.get("Request Count", 0) or 0),
            "create_errors": float(create.get("Failure Count", 0) or 0)}


def section(rows: list[dict[str, float]], seconds: int, method: str | None) -> str:
    lines = [START, "<!-- written by `python -m bench.load_observations --write docs/PERFORMANCE.md` -->",
             "### Observation load (PostgreSQL, locust, 8 clients)", "",
             f"8 locust clients, each looping over its own `{DATASET}` session (429 x 756; references: the other "
             f"421 models; the shared prior computed before the run), {seconds} s per row, method `{method or 'default'}`; observation posts only. Goal: "
             ">= 150 posts/s, p50 <= 30 ms, p99 <= 250 ms, 0 errors. Before (issue 13): 44 posts/s, p50 119 ms, "
             "p99 1.2 s.", "",
             "| uvicorn workers | posts | posts/s | p50 (ms) | p99 (ms) | errors | sessions created |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['workers']:.0f} | {r['posts']:.0f} | {r['rps']:.1f} | {r['p50']:.0f} | {r['p99']:.0f} | "
                     f"{r['errors']:.0f} | {r['creates']:.0f} |")
    lines += ["", "Measured on the shared 2-core machine while ~7 other helpers ran builds and tests, so the "
              "figures are a lower bound of what the service does on an idle machine; locust and PostgreSQL "
              "share the same 2 cores.", END]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--method", default=None, help="session method (default: the service's default)")
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    rows = [run(w, args.seconds, args.method) for w in args.workers]
    text = section(rows, args.seconds, args.method)
    print(text)
    if args.write:
        write_section(args.write, text, START, END)


if __name__ == "__main__":
    main()
