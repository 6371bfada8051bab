"""Memory and time of the hostile uploads of issue 32 items 2 and 3, on a real `evalplan serve` process
(PostgreSQL): its resident set size (itself and its children, e.g. the chart workers) is sampled every 5 ms
while one upload is posted, and the kernel's high-water mark read after; reported: the peak above the
baseline (the process after a warm-up request), the answer and the wall time.

    nice -n 10 python -m bench.service.hostile_upload_memory --write docs/RELIABILITY.md

Cases (each is refused; the goal is < 300 MB above baseline, issue 32 "Goal"):

* ``prefix-bomb``: ``\\0\\0junk`` + a zip whose ``header.json`` inflates to 200 MB of spaces (``.eval``,
  ~200 KB): the old check skipped it (no ``PK`` first), the reader opened it (528 -> 2,576 MB);
* ``values-bomb``: a ~100 KB ``.eval`` whose ``header.json`` is 100 MB of ``{},`` (33 M values; 2.9 GB before);
* ``long-json``: ``[{model, item, score}]`` naming 1,000,000 items (40 MB; 413 after 38 s and +670 MB before);
* ``wide-csv (peer)``: the wide CSV naming the same 1,000,000 items (one row), the early refusal to match.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import threading
import time
import zipfile
from pathlib import Path

import httpx
import psutil

from bench.common.markdown_sections import write_section
from bench.common.server import ROOT, drop_database, fresh_database, running_server
from bench.service.upload_memory import high_water_mark, peak_during

START, END = "<!-- hostile-upload-memory -->", "<!-- /hostile-upload-memory -->"
DATABASE = "evalplan_bench_hostile_uploads"
MB = 1 << 20


def _zip_of(member: str, chunks: int, chunk: bytes, prefix: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive, \
            archive.open(member, "w") as out:
        for _ in range(chunks):
            out.write(chunk)
    return prefix + buffer.getvalue()


def cases() -> dict[str, tuple[str, dict[str, object]]]:
    """name -> (path, httpx request keywords)."""
    prefix_bomb = _zip_of("header.json", 200, b" " * MB, prefix=b"\0\0junk")
    values = b"{}," * (MB // 3)
    values_bomb = _zip_of("header.json", 100, values)
    long_json = ("[" + ",".join(f'{{"model":"m","item":"q{j}","score":1}}' for j in range(1_000_000)) + "]").encode()
    n = 1_000_000
    wide_csv = ("model," + ",".join(f"q{j}" for j in range(n)) + "\nm1," + ",".join("1" for _ in range(n))
                + "\n").encode()
    return {
        "prefix-bomb": ("/v1/imports/inspect", {"files": [("files", ("p.eval", prefix_bomb, "application/zip"))]}),
        "values-bomb": ("/v1/imports/inspect", {"files": [("files", ("v.eval", values_bomb, "application/zip"))]}),
        "long-json": ("/v1/benchmarks/mem/scores", {"content": long_json,
                                                    "headers": {"content-type": "application/json"}}),
        "wide-csv (peer)": ("/v1/benchmarks/mem/scores", {"content": wide_csv, "headers": {"content-type": "text/csv"}}),
    }


def measure() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    url = fresh_database(DATABASE, ROOT)
    try:
        with running_server(url, ROOT) as (base, proc), httpx.Client(base_url=base, timeout=600) as client:
            assert client.post("/v1/benchmarks", json={"name": "mem", "score_kind": "binary"}).status_code == 201
            warm = client.post("/v1/benchmarks/mem/scores", json=[{"model": "w", "item": "q0", "score": 1}])
            assert warm.status_code == 200, warm.text
            for name, (path, request) in cases().items():
                time.sleep(1.0)
                baseline = psutil.Process(proc.pid).memory_info().rss
                result: dict[str, object] = {}

                def post(p: str = path, r: dict[str, object] = request, out: dict[str, object] = result) -> None:
                    started = time.perf_counter()
                    answer = client.post(p, **r)  # type: ignore[arg-type]
                    out["status"], out["seconds"] = answer.status_code, time.perf_counter() - started
                    out["detail"] = answer.json().get("detail", "")[:120]

                sampled = peak_during(proc.pid, threading.Thread(target=post))
                size = len(request["content"]) if "content" in request else len(request["files"][0][1][1])  # type: ignore[index]
                rows.append({"case": name, "upload_kb": size / 1024, "status": result["status"],
                             "seconds": result["seconds"], "baseline_mb": baseline / 1e6,
                             "above_mb": (max(sampled, 0) - baseline) / 1e6, "hwm_mb": high_water_mark(proc.pid) / 1e6,
                             "detail": result["detail"], "load": os.getloadavg()[0]})
                print(rows[-1], flush=True)
            assert client.get("/health").json() == {"status": "ok"}
    finally:
        drop_database(DATABASE)
    return rows


def section(rows: list[dict[str, object]]) -> str:
    lines = [START, "<!-- written by `python -m bench.service.hostile_upload_memory --write docs/RELIABILITY.md` -->",
             "### Hostile uploads: memory and time (issue 32 items 2, 3)", "",
             "`nice -n 10 python -m bench.service.hostile_upload_memory --write docs/RELIABILITY.md`: one "
             "`evalplan serve` process on PostgreSQL; peak resident memory (process and children, sampled every "
             "5 ms) above the process's baseline before each upload, and the wall time to the answer. Goal: "
             "< 300 MB above baseline. The figures before the fix are the issue's (another machine, 2 workers).",
             "", "| case | upload (KB) | answer | seconds | peak above baseline (MB) | process VmHWM (MB) | load | before |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    before = {"prefix-bomb": "528 -> 2,576 MB", "values-bomb": "2.9 GB (worker)", "long-json": "413 after 38 s, +670 MB",
              "wide-csv (peer)": "413 in 0.5 s"}
    for r in rows:
        lines.append(f"| {r['case']} | {float(r['upload_kb']):,.0f} | {r['status']} | {float(r['seconds']):.1f} | "  # type: ignore[arg-type]
                     f"{float(r['above_mb']):.0f} | {float(r['hwm_mb']):.0f} | {float(r['load']):.1f} | "  # type: ignore[arg-type]
                     f"{before.get(str(r['case']), '')} |")
    lines += ["", "Measured on the shared 2-core machine with other helpers running (load = 1-minute load "
              "average after the row).", END]
    return "\n".join(lines)


STORE = ROOT / "bench" / "results" / "hostile_upload_memory.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", type=Path)
    parser.add_argument("--render", action="store_true", help="only rebuild the section from the stored rows")
    args = parser.parse_args()
    rows = json.loads(STORE.read_text())["rows"] if args.render else measure()
    if not args.render:
        STORE.write_text(json.dumps({"argv": sys.argv[1:], "rows": rows}, indent=1) + "\n")
    text = section(rows)
    if args.write:
        write_section(args.write, text, START, END)
    print(text)


if __name__ == "__main__":
    main()
