"""RepCore alignment training speed and memory on CPU (paper 003 §2.2), SYNTHETIC states.

10 source models x 12,000 items, hidden widths drawn uniformly in [2048, 4096] (seeded),
float16 states generated in memory by ``make_synthetic_suite`` (SYNTHETIC data), trained with
``AlignmentTrainer`` at its defaults (d_z 32, proj 128, hidden 64, AdamW lr 1e-3, wd 1e-2,
batch 256 items, up to 100 epochs, patience 10; the paper gives none of these but d_z). The run
is bounded by ``--time-limit`` (training stops after the first epoch that ends past it and
reports it). Measured: wall and process CPU time of ``fit`` (incl. standardization statistics
and the final embedding pass), per-epoch wall time, peak RSS during the fit (``VmHWM``, reset
through ``/proc/self/clear_refs`` after generating the data, so it counts the states, Python
and torch as well as the training buffers) and the RSS growth over the pre-fit level.

Usage: python -m bench.coresets.repcore_speed_bench [--items 12000] [--sources 10] [--time-limit 560]
                                           [--write docs/PERFORMANCE.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from bench.common.markdown_sections import write_section as write_marked_section
from evalplan.core.repcore.alignment import AlignmentTrainer
from evalplan.core.repcore.synthetic import make_synthetic_suite

START, END = "<!-- repcore-speed -->", "<!-- /repcore-speed -->"


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return -1


def _reset_hwm() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def write_section(path: Path, section: str) -> None:
    write_marked_section(path, section, START, END, new_file="")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=12000)
    ap.add_argument("--sources", type=int, default=10)
    ap.add_argument("--time-limit", type=float, default=560.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--write", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    rng = np.random.default_rng(2024)
    widths = [int(w) for w in rng.integers(2048, 4097, size=args.sources)]
    t0 = time.perf_counter()
    suite = make_synthetic_suite(n_items=args.items, n_sources=args.sources, n_targets=0,
                                 widths=widths, seed=0, dtype=np.float16)
    gen_s = time.perf_counter() - t0
    states_mb = sum(h.nbytes for h in suite.source_states) / 2**20
    rss_before = _status_kb("VmRSS")
    hwm_reset = _reset_hwm()

    epoch_marks: list[float] = []
    tr = AlignmentTrainer(seed=0, device="cpu", time_limit_s=args.time_limit)
    c0 = time.process_time(); w0 = time.perf_counter()
    tr.fit(suite.source_states, suite.source_correctness,
           progress=lambda f: epoch_marks.append(time.perf_counter()))
    wall = time.perf_counter() - w0; cpu = time.process_time() - c0
    peak_kb = _status_kb("VmHWM")
    marks = np.diff([w0] + epoch_marks[: tr.n_epochs_])
    per_epoch = float(np.median(marks)) if len(marks) else float("nan")
    load = os.getloadavg()[0]
    projected = per_epoch * tr.epochs

    rows = [
        ("data (SYNTHETIC, float16, in memory)",
         f"{args.sources} sources x {args.items:,} items, widths {min(widths)}..{max(widths)} "
         f"(sum {sum(widths):,}); states {states_mb:,.0f} MiB; generated in {gen_s:.1f} s (not timed below)"),
        ("epochs run / max", f"{tr.n_epochs_} / {tr.epochs} (stop: `{tr.stop_reason_}`, best epoch {tr.best_epoch_ + 1})"),
        ("fit wall time", f"**{wall:.1f} s** ({wall / 60:.2f} min); process CPU {cpu:.1f} s"),
        ("wall per epoch (median)", f"{per_epoch:.2f} s; first {marks[0]:.2f} s (includes the float64 standardization statistics over the train rows and warm-up)" if len(marks) else "n/a"),
        ("projected, all 100 epochs without early stopping", f"{projected:.0f} s ({projected / 60:.1f} min)"),
        ("peak RSS during fit (VmHWM, whole process)", f"**{peak_kb / 2**20:.2f} GiB**" + ("" if hwm_reset else " (VmHWM not reset: includes data generation)")),
        ("RSS before fit (Python + torch + states)", f"{rss_before / 2**20:.2f} GiB"),
        ("test AUC (20% test items, pooled)", f"{tr.test_auc_:.3f}"),
        ("targets", "<= 10 min, <= 4 GB"),
    ]
    section = "\n".join([
        START,
        "<!-- written by `python -m bench.coresets.repcore_speed_bench --write docs/PERFORMANCE.md` -->",
        "### RepCore alignment training (`src/evalplan/core/repcore/alignment.py`, paper 003 §2.2)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores (torch threads {torch.get_num_threads()}), "
        f"device `cpu`, Python {platform.python_version()}, torch {torch.__version__}. "
        f"Shared machine: 1-minute load average {load:.1f} at the end. "
        "`AlignmentTrainer` defaults (none from the paper except d_z = 32): per-source Linear(d_m, 128) "
        "-> shared MLP 128-64-32 -> linear head, AdamW lr 1e-3, weight decay 1e-2, 256 items x all sources "
        "per step, up to 100 epochs, early stopping patience 10 on the validation loss (70/10/20 item split), "
        f"bounded here by a {args.time_limit:.0f} s time limit. States stay float16; each step converts its "
        "256 x d_m rows per source to float32.",
        "",
        "| measure | value |",
        "|---|---|",
        *[f"| {a} | {b} |" for a, b in rows],
        "",
        END,
    ])
    print(section)
    if args.write:
        write_section(args.write, section)


if __name__ == "__main__":
    main()
