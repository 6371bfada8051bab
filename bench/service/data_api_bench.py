"""Benchmark the data API through HTTP against PostgreSQL (issue: service foundation).

Measures, over N runs (median reported), on ``openllm_v2_musr/scores.csv`` (429 x 756):
* upload of the wide CSV into a fresh database (target <= 5 s);
* download of the same matrix as CSV (target <= 2 s);
* peak RSS of the API process during the upload (target <= 500 MB).
Peer in the same run: a bare psycopg COPY of the same 324k cells into an equivalent
table (the floor any HTTP upload path pays), reported as a ratio.

Usage: python -m bench.service.data_api_bench [--runs 5] [--write docs/PERFORMANCE.md]
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import platform
import statistics
import threading
import time
from pathlib import Path

import httpx
import psutil
import psycopg

from bench.common.markdown_sections import write_section as write_marked_section
from bench.common.server import data_dir, fresh_database, running_server


class PeakRss:
    """Sample a process's RSS every 10 ms in a thread; ``peak`` in bytes."""

    def __init__(self, pid: int) -> None:
        self.process, self.peak, self._stop = psutil.Process(pid), 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.01)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def copy_peer(database_url: str, csv_bytes: bytes) -> float:
    """Time a direct COPY of the long cells (parse included) into a scratch table."""
    url = database_url.replace("postgresql+psycopg://", "postgresql://")
    start = time.perf_counter()
    rows = list(csv.reader(io.StringIO(csv_bytes.decode())))
    header = rows[0][1:]
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.execute("CREATE TEMP TABLE peer (model text, item text, value float8)")
        with cur.copy("COPY peer (model, item, value) FROM STDIN") as copy:
            for row in rows[1:]:
                copy.write("".join(f"{row[0]}\t{item}\t{v}\n" for item, v in zip(header, row[1:]) if v))
        conn.commit()
    return time.perf_counter() - start


def run_once(database_url: str, csv_bytes: bytes) -> dict[str, float]:
    with running_server(database_url) as (base, proc):
        with httpx.Client(base_url=base, timeout=120) as http:
            assert http.post("/v1/benchmarks", json={"name": "musr", "score_kind": "binary"}).status_code == 201
            rss_idle = psutil.Process(proc.pid).memory_info().rss
            with PeakRss(proc.pid) as rss:
                start = time.perf_counter()
                r = http.post("/v1/benchmarks/musr/scores", content=csv_bytes, headers={"content-type": "text/csv"})
                upload = time.perf_counter() - start
            assert r.status_code == 200, r.text
            assert r.json()["n_scores"] == 429 * 756
            start = time.perf_counter()
            r = http.get("/v1/benchmarks/musr/scores", headers={"accept": "text/csv"})
            download = time.perf_counter() - start
            assert r.status_code == 200 and r.content == csv_bytes, "download differs from upload"
    return {"upload_s": upload, "download_s": download, "peak_rss_mb": rss.peak / 2**20,
            "idle_rss_mb": rss_idle / 2**20, "peer_copy_s": copy_peer(database_url, csv_bytes)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", type=Path, default=None, help="rewrite the figures section of this markdown file")
    args = parser.parse_args()
    csv_bytes = (data_dir() / "openllm_v2_musr" / "scores.csv").read_bytes()
    runs = []
    for i in range(args.runs):
        url = fresh_database("evalplan_bench")
        runs.append(run_once(url, csv_bytes))
        print(f"run {i + 1}: " + ", ".join(f"{k}={v:.3f}" for k, v in runs[-1].items()), flush=True)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    table = render(med, runs)
    print(table)
    if args.write:
        write_section(args.write, table)


def render(med: dict[str, float], runs: list[dict[str, float]]) -> str:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM, " \
              f"Python {platform.python_version()}, PostgreSQL on 127.0.0.1"
    return "\n".join([
        "<!-- figures: written by `python -m bench.service.data_api_bench --write docs/PERFORMANCE.md` -->",
        "### Data API: score matrix upload and download (PostgreSQL, through HTTP)",
        "",
        f"Machine: {machine}. Median of {len(runs)} runs, each on a fresh database, through HTTP "
        f"(`evalplan serve`, one uvicorn process).",
        "",
        "| measure | median | target | all runs |",
        "|---|---|---|---|",
        f"| upload `openllm_v2_musr/scores.csv` (429 x 756 = 324,324 cells) | {med['upload_s']:.2f} s | <= 5 s | "
        + ", ".join(f"{r['upload_s']:.2f}" for r in runs) + " |",
        f"| download the same matrix as CSV | {med['download_s']:.2f} s | <= 2 s | "
        + ", ".join(f"{r['download_s']:.2f}" for r in runs) + " |",
        f"| peak RSS of the API process during the upload | {med['peak_rss_mb']:.0f} MB | <= 500 MB | "
        + ", ".join(f"{r['peak_rss_mb']:.0f}" for r in runs) + " |",
        f"| (RSS of the idle API process before the upload) | {med['idle_rss_mb']:.0f} MB | | |",
        f"| peer: bare psycopg COPY of the same cells (parse included) | {med['peer_copy_s']:.2f} s | | "
        + ", ".join(f"{r['peer_copy_s']:.2f}" for r in runs) + " |",
        f"| upload / peer ratio | {med['upload_s'] / med['peer_copy_s']:.1f}x | | |",
        "<!-- /figures -->",
    ])


def write_section(path: Path, table: str) -> None:
    write_marked_section(path, table, "<!-- figures", "<!-- /figures -->",
                         new_file="# Performance\n\n<!-- figures --><!-- /figures -->\n")


if __name__ == "__main__":
    main()
