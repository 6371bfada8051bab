"""The budget planner's wall time on MuSR (issue 25 §4: <= 60 s for 756 items and 426 references).

``nice -n 10 python -m bench.coresets.planner_speed_bench [--repeats 2] [--write docs/PERFORMANCE.md]``

What the plan job runs (``evalplan.plans.tasks.run_plan_job``): :func:`evalplan.core.backtest.planner.plan_benchmark`
under one BLAS thread, with the service's defaults (candidates, budget grid, 3 backtest seeds) on
``openllm_v2_musr`` with 426 references (three models held out, as in the issue's report), half-width 0.02 at
the 0.95 level. Reported per repeat: wall time, the plan (method, items) and the 1-minute load average at the
end (the machine is shared; the goal is for this machine).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from bench.common.markdown_sections import INTERPRETATION, write_section
from bench.common.shared_data import load_scores
from evalplan.core.backtest.planner import plan_benchmark

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- planner-speed -->", "<!-- /planner-speed -->"
GOAL_S = 60.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--half-width", type=float, default=0.02)
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--write", default=None)
    args = ap.parse_args()
    Y = load_scores("openllm_v2_musr")
    held_out = np.random.default_rng(0).choice(Y.shape[0], size=3, replace=False)
    refs = np.delete(Y, held_out, axis=0)
    rows = []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        with threadpool_limits(limits=1):
            plan = plan_benchmark(refs, args.half_width, args.level)
        sec = time.perf_counter() - t0
        rows.append((r + 1, sec, plan["label"], plan["budget"], plan["interval_width"], os.getloadavg()[0]))
        print(rows[-1], flush=True)
    lines = [START, "## Budget planner wall time on MuSR (issue 25 §4)", "",
             f"`nice -n 10 python -m bench.coresets.planner_speed_bench --repeats {args.repeats} --write "
             f"docs/PERFORMANCE.md`: `plan_benchmark` as the plan job runs it (one BLAS thread, default candidates, "
             f"budget grid and 3 seeds) on openllm_v2_musr, {refs.shape[0]} references x {refs.shape[1]} items, "
             f"half-width {args.half_width} at {args.level}. Goal <= {GOAL_S:.0f} s. Machine: {os.cpu_count()} cores, "
             f"shared; load = 1-minute load average at the end of the run.", "",
             "| run | wall time | plan | items of 756 | interval width | load |", "|---|---|---|---|---|---|"]
    lines += [f"| {r} | {s:.1f} s | {label} | {n} | {w:.4f} | {load:.1f} |" for r, s, label, n, w, load in rows]
    best = min(s for _, s, *_ in rows)
    lines += ["", f"Fastest run {best:.1f} s: goal {'met' if best <= GOAL_S else 'missed'} "
              f"({best / GOAL_S:.2f}x the {GOAL_S:.0f} s goal); measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
              "", INTERPRETATION[0], INTERPRETATION[1], END]
    section = "\n".join(lines)
    print(section)
    if args.write:
        write_section(ROOT / args.write, section, START, END)


if __name__ == "__main__":
    main()
