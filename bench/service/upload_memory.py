"""Peak memory and wall time of one wide-CSV score upload (issue 13, failure 5): a real `evalplan serve`
process on a fresh PostgreSQL database; its resident set size is sampled every 5 ms while one CSV of the
given size is posted; reported: the peak above the idle baseline, that as a multiple of the body, the wall
time from the first byte sent to the 200 answer (parse + model/item rows + COPY + upsert + commit) and the
cells stored per second.

    nice -n 10 python -m bench.service.upload_memory --mb 200 --baseline 5a2af70 --baseline-mb 20 --write docs/PERFORMANCE.md

``--baseline REF`` also runs the previous code (a temporary git worktree of REF, its own server on its own
fresh database) on a ``--baseline-mb`` body, followed by this code on the same body, for a ratio in the same
run on the same machine (the previous code did not finish 200 MB in 41 min, so its row is a smaller body).

The CSV is written to a temporary file (``--tmp``, default /tmp) row by row and streamed from it (with
its Content-Length), so the bench process never holds the body; the file is deleted after, and so is the
bench database. The peak is read twice: sampled every 5 ms (``psutil``) and the kernel's high-water mark
``VmHWM`` of /proc/<pid>/status (exact, over the process's life: the larger of the two is reported).

The CSV is models x items of 0/1 and continuous cells (``0``, ``1``, ``0.25``: 2-5 bytes a cell), the
shape of the real wide files. Goals: a 200 MB upload (the body limit) in under 1.5 GB, and it finishes
(under the default 900 s bulk statement timeout, ``EVALPLAN_DB_BULK_STATEMENT_TIMEOUT_S``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import psutil

from bench.common.markdown_sections import write_section
from bench.common.server import ROOT, drop_database, fresh_database, running_server, source_tree

START, END = "<!-- upload-memory -->", "<!-- /upload-memory -->"
N_ITEMS = 20_000


def csv_rows(megabytes: float, seed: int = 0) -> Iterator[bytes]:
    """A wide score CSV of about ``megabytes`` MB, a line at a time: rows are models, columns items
    (continuous scores)."""
    rng = np.random.default_rng(seed)
    cells = np.array(["0", "1", "0.25", "0.5", "0.75"])
    yield ("model," + ",".join(f"item{j}" for j in range(N_ITEMS)) + "\n").encode()
    row_bytes = sum(len(c) for c in cells) / len(cells) * N_ITEMS + N_ITEMS + 10
    n_models = max(1, int(megabytes * 1e6 / row_bytes))
    for i in range(n_models):
        yield (f"model-{i}," + ",".join(cells[rng.integers(0, len(cells), N_ITEMS)]) + "\n").encode()


def make_csv(megabytes: float, seed: int = 0) -> bytes:
    return b"".join(csv_rows(megabytes, seed))


def write_csv(megabytes: float, folder: str | None) -> Path:
    """The CSV of ``csv_rows`` in a temporary file (the caller deletes it)."""
    fd, name = tempfile.mkstemp(prefix="evalplan-upload-", suffix=".csv", dir=folder)
    with os.fdopen(fd, "wb") as f:
        for line in csv_rows(megabytes):
            f.write(line)
    return Path(name)


def file_chunks(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(size):
            yield chunk


def high_water_mark(pid: int) -> int:
    """``VmHWM`` (peak resident set size, bytes) of ``pid`` and its children, from /proc."""
    total = 0
    proc = psutil.Process(pid)
    for p in [proc, *proc.children(recursive=True)]:
        try:
            for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


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


DATABASE = "evalplan_bench_upload_memory"


def measure(megabytes: float, folder: str | None = None, src: Path = ROOT) -> dict[str, float]:
    path = write_csv(megabytes, folder)
    try:
        return _measure(path, src)
    finally:
        path.unlink()
        drop_database(DATABASE)  # tens of millions of rows: give the disk back


def _measure(path: Path, src: Path) -> dict[str, float]:
    body_bytes = path.stat().st_size
    url = fresh_database(DATABASE, src)
    # no statement timeouts: the previous code's upsert of millions of cells ran past them on the loaded
    # machine, and a row should measure the write, not a cancelled one
    env = {"EVALPLAN_DB_STATEMENT_TIMEOUT_S": "0", "EVALPLAN_DB_BULK_STATEMENT_TIMEOUT_S": "0"}
    with running_server(url, src, **env) as (base, proc):
        with httpx.Client(base_url=base, timeout=httpx.Timeout(7200, connect=30)) as client:
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
                r = client.post("/v1/benchmarks/mem/scores", content=file_chunks(path),
                                headers={"content-type": "text/csv", "content-length": str(body_bytes)})
                result["status"], result["seconds"] = r.status_code, time.perf_counter() - started
                result["n_scores"] = r.json().get("n_scores") if r.status_code == 200 else r.text[:200]

            sampled = peak_during(proc.pid, threading.Thread(target=upload))
            hwm = high_water_mark(proc.pid)
    assert result["status"] == 200, result
    peak = max(sampled, hwm)
    seconds, n_scores = float(result["seconds"]), float(result["n_scores"])  # type: ignore[arg-type]
    return {"body_mb": body_bytes / 1e6, "baseline_mb": baseline / 1e6, "peak_mb": peak / 1e6,
            "sampled_mb": sampled / 1e6, "hwm_mb": hwm / 1e6,
            "above_mb": (peak - baseline) / 1e6, "ratio": (peak - baseline) / body_bytes,
            "peak_ratio": peak / body_bytes, "seconds": seconds, "n_scores": n_scores,
            "cells_per_s": n_scores / max(seconds, 1e-9), "load": os.getloadavg()[0]}


def section(rows: list[dict[str, object]], argv: list[str]) -> str:
    lines = [START, "<!-- written by `python -m bench.service.upload_memory --write docs/PERFORMANCE.md` -->",
             "### Upload memory and time (wide CSV scores, PostgreSQL)", "",
             f"`nice -n 10 python -m bench.service.upload_memory {' '.join(argv)}`. "
             "Peak resident memory of the `evalplan serve` process while one wide CSV is uploaded "
             f"({N_ITEMS} items per row, cells `0`/`1`/`0.25`/...; about 3.6 bytes a cell), streamed from a file in "
             "/tmp, and the wall time from the first byte sent to the 200 answer (parse, model and item rows, the "
             "score write, commit). Peak = the larger of the 5 ms samples and the kernel's VmHWM; baseline = the "
             "process after a warm-up upload. Goals (issue 27): a 200 MB upload (the body limit) in <= 120 s "
             "(>= 15x the 1,772 s of 2150797) with a peak <= 3x the body. Before the streaming parser: about 23x the body; before the binary COPY (the previous "
             "code): the 200 MB upload had not finished after 41 min (issue 13).", "",
             "| code | body (MB) | cells | seconds | cells/s | process peak (MB) | peak / body "
             "| peak above baseline (MB) | above / body | load |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['body_mb']:.0f} | {r['n_scores']:.0f} | {r['seconds']:.1f} | "
                     f"{r['cells_per_s']:,.0f} | {r['peak_mb']:.0f} | {r['peak_ratio']:.2f} | {r['above_mb']:.0f} | "
                     f"{r['ratio']:.2f} | {r['load']:.1f} |")
    pairs = [(old, new) for old in rows if old["label"] != "this code"
             for new in rows if new["label"] == "this code" and new["body_mb"] == old["body_mb"]]
    for old, new in pairs:
        lines += ["", f"This code vs {old['label']} on the same {old['body_mb']:.0f} MB body in the same run: "
                  f"x{float(old['seconds']) / max(float(new['seconds']), 1e-9):.1f} faster "  # type: ignore[arg-type]
                  f"({float(old['seconds']):.0f} s -> {float(new['seconds']):.0f} s)."]  # type: ignore[arg-type]
    lines += ["", "Measured on the shared 2-core machine (other helpers running; load = 1-minute load average "
              "at the end of the row), every row with `EVALPLAN_DB_STATEMENT_TIMEOUT_S=0 "
              "EVALPLAN_DB_BULK_STATEMENT_TIMEOUT_S=0` (the previous code's single upsert of millions of cells ran "
              "past the defaults; this code writes packed score rows in rounds of ~2 M cells, each statement far "
              "under the default 900 s bulk statement timeout, which applies per statement).", END]
    return "\n".join(lines)


STORE = ROOT / "bench" / "results" / "upload_memory.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, nargs="+", default=[20.0])
    parser.add_argument("--baseline", default=None, metavar="GIT_REF",
                        help="also run the previous code (a git ref) on a --baseline-mb body, then this code on it")
    parser.add_argument("--baseline-mb", type=float, default=20.0)
    parser.add_argument("--tmp", default=None, help="folder of the temporary CSV (default: the system's, /tmp)")
    parser.add_argument("--write", type=Path)
    parser.add_argument("--render", action="store_true",
                        help=f"only rebuild the section from the stored rows ({STORE.relative_to(ROOT)})")
    args = parser.parse_args()
    if args.render:
        stored = json.loads(STORE.read_text())
        text = section(stored["rows"], stored["argv"])
        if args.write:
            write_section(args.write, text, START, END)
        print(text)
        return
    runs: list[tuple[str, float, str | None]] = []
    if args.baseline:
        runs += [(f"previous ({args.baseline})", args.baseline_mb, args.baseline),
                 ("this code", args.baseline_mb, None)]
    runs += [("this code", mb, None) for mb in args.mb if not (args.baseline and mb == args.baseline_mb)]
    rows: list[dict[str, object]] = []
    argv = sys.argv[1:]
    for label, mb, ref in runs:  # the section is written after each row, so a long run keeps what it measured
        with source_tree(ref) as src:
            rows.append({"label": label, **measure(mb, args.tmp, src)})
        print(rows[-1], flush=True)
        STORE.write_text(json.dumps({"argv": argv, "rows": rows}, indent=1) + "\n")
        text = section(rows, argv)
        if args.write:
            write_section(args.write, text, START, END)
    print(text)


if __name__ == "__main__":
    main()
