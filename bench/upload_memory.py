"""Peak memory of one wide-CSV score upload (issue 13, failure 5): a real `evalplan serve` process on a
fresh PostgreSQL database; its resident set size is sampled every 5 ms while one CSV of the given size
is posted; reported: the peak above the idle baseline, and that as a multiple of the body.

    nice -n 10 python -m bench.upload_memory --mb 20 50 --write docs/PERFORMANCE.md

The CSV is models x items of 0/1 and continuous cells (``0``, ``1``, ``0.25``: 2-5 bytes a cell), the
shape of the real wide files. Goal: a 200 MB upload (the body limit) in under 1.5 GB.
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import psutil

from bench.markdown_sections import write_section
from bench.server import fresh_database, running_server

START, END = "<!-- upload-memory -->", "<!-- /upload-memory -->"
N_ITEMS = 20_000


def make_csv(megabytes: float, seed: int = 0) -> bytes:
    """A wide score CSV of about ``megabytes`` MB: rows are models, columns items (continuous scores)."""
    rng = np.random.default_rng(seed)
    cells = np.array(["0", "1", "0.25", "0.5", "0.75"])
    header = "model," + ",".join(f"item{j}" for j in range(N_ITEMS)) + "\n"
    row_bytes = sum(len(c) for c in cells) / len(cells) * N_ITEMS + N_ITEMS + 10
    n_models = max(1, int(megabytes * 1e6 / row_bytes))
    lines = [header]
    for i in range(n_models):
        lines.append(f"model-{i}," + ",".join(cells[rng.integers(0, len(cells), N_ITEMS)]) + "\n")
    return "".join(lines).encode()


def peak_during(pid: int, action: threading.Thread) -> int:
    """The largest RSS of ``pid`` (and its children) while ``action`` runs."""
    proc = psutil.Process(pid)
    peak = 0
    action.start()
    while action.is_alive():
        try:
            rss = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
        except psutil.Error:
            break
        peak = max(peak, rss)
        time.sleep(0.005)
    action.join()
    return peak


def measure(megabytes: float) -> dict[str, float]:
    body = make_csv(megabytes)
    url = fresh_database("evalplan_bench_upload_memory")
    # a bulk upload of millions of cells runs past the default 60 s statement timeout on a loaded machine
    with running_server(url, EVALPLAN_DB_STATEMENT_TIMEOUT_S="0") as (base, proc):
        with httpx.Client(base_url=base, timeout=600) as client:
            assert client.post("/v1/benchmarks", json={"name": "mem", "score_kind": "continuous",
                                                       "score_min": 0, "score_max": 1}).status_code == 201
            # warm-up: one small upload first, so lazy imports and caches are in the baseline
            warm = make_csv(0.2, seed=1).replace(b"model-", b"warm-")
            assert client.post("/v1/benchmarks/mem/scores", content=warm,
                               headers={"content-type": "text/csv"}).status_code == 200
            time.sleep(1.0)
            baseline = psutil.Process(proc.pid).memory_info().rss
            result: dict[str, object] = {}

            def upload() -> None:
                started = time.perf_counter()
                r = client.post("/v1/benchmarks/mem/scores", content=body, headers={"content-type": "text/csv"})
                result["status"], result["seconds"] = r.status_code, time.perf_counter() - started
                result["n_scores"] = r.json().get("n_scores") if r.status_code == 200 else r.text[:200]

            peak = peak_during(proc.pid, threading.Thread(target=upload))
    assert result["status"] == 200, result
    return {"body_mb": len(body) / 1e6, "baseline_mb": baseline / 1e6, "peak_mb": peak / 1e6,
            "above_mb": (peak - baseline) / 1e6, "ratio": (peak - baseline) / len(body),
            "seconds": float(result["seconds"]), "n_scores": float(result["n_scores"])}  # type: ignore[arg-type]


def section(rows: list[dict[str, float]]) -> str:
    lines = [START, "<!-- written by `python -m bench.upload_memory --write docs/PERFORMANCE.md` -->",
             "### Upload memory (wide CSV scores, PostgreSQL)", "",
             "Peak resident memory of the `evalplan serve` process while one wide CSV is uploaded "
             f"({N_ITEMS} items per row, cells `0`/`1`/`0.25`/...), above its idle baseline. Goal: a 200 MB upload "
             "(the body limit) under 1.5 GB. Before the streaming parser: about 23x the body (issue 13).", "",
             "| body (MB) | cells | peak above baseline (MB) | x body | process peak (MB) | seconds |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['body_mb']:.0f} | {r['n_scores']:.0f} | {r['above_mb']:.0f} | {r['ratio']:.1f} | "
                     f"{r['peak_mb']:.0f} | {r['seconds']:.1f} |")
    lines += ["", "Measured on the shared 2-core machine (other helpers running).", END]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, nargs="+", default=[20.0])
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    rows = [measure(mb) for mb in args.mb]
    text = section(rows)
    print(text)
    if args.write:
        write_section(args.write, text, START, END)


if __name__ == "__main__":
    main()
