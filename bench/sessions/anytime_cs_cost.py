"""What ``stop.anytime_valid`` costs in items (docs/API_NOTES.md "Sessions: precision stopping").

For random targets of each data set, one uniform random order of the target's items; the items needed
until the 95% interval's half-width is <= h (and n >= 10), for
* the anytime-valid betting confidence sequence (``evalplan.core.sequential.stopping.BettingCS``), and
* RS-Mean's fixed-n normal interval (``rs_mean_s2``, finite-population correction), which is what a
  random-sampling session reports without ``anytime_valid``.
Same orders for both. Writes the ``anytime-cost`` section of docs/RESULTS.md.

    EVALPLAN_DATA_DIR=../shared/data nice -n 10 python -m bench.sessions.anytime_cs_cost --write docs/RESULTS.md
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from bench.common.markdown_sections import write_section
from bench.sessions.sequential_accuracy_bench import data_dir, load
from evalplan.core.sequential.estimator import Z975, rs_mean_s2
from evalplan.core.sequential.stopping import BettingCS

BEGIN, END = "<!-- anytime-cost -->", "<!-- /anytime-cost -->"
DATASETS = ("openllm_v2_musr", "openllm_v2_math_hard", "helm_lite_gsm", "alpacaeval1")
HALF_WIDTHS = (0.05, 0.02)


def items_to(order: np.ndarray, N: int, min_items: int = 10) -> tuple[dict[float, int], dict[float, int]]:
    cs = BettingCS(N, 0.95)
    hit_cs: dict[float, int] = {}
    hit_rs: dict[float, int] = {}
    for t, x in enumerate(order, 1):
        cs.update(float(x))
        lo, hi = cs.interval()
        rs = Z975 * math.sqrt(rs_mean_s2(order[:t]) / t * (1 - t / N)) if t > 1 else math.inf
        for h in HALF_WIDTHS:
            if t >= min_items and h not in hit_cs and (hi - lo) / 2 <= h:
                hit_cs[h] = t
            if t >= min_items and h not in hit_rs and rs <= h:
                hit_rs[h] = t
        if len(hit_cs) == len(HALF_WIDTHS) and len(hit_rs) == len(HALF_WIDTHS):
            break
    return hit_rs, hit_cs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--targets", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    rows = []
    for name in args.datasets:
        _, X = load(name)
        rng = np.random.default_rng(args.seed)
        rs_n: dict[float, list[int]] = {h: [] for h in HALF_WIDTHS}
        cs_n: dict[float, list[int]] = {h: [] for h in HALF_WIDTHS}
        Ns = []
        for r in rng.choice(X.shape[0], size=min(args.targets, X.shape[0]), replace=False):
            pop = X[r][~np.isnan(X[r])]
            Ns.append(len(pop))
            hit_rs, hit_cs = items_to(rng.permutation(pop), len(pop))
            for h in HALF_WIDTHS:
                rs_n[h].append(hit_rs.get(h, len(pop)))
                cs_n[h].append(hit_cs.get(h, len(pop)))
        cells = []
        for h in HALF_WIDTHS:
            a, b = float(np.mean(rs_n[h])), float(np.mean(cs_n[h]))
            cells.append(f"{a:.0f} | {b:.0f} | {b / a:.2f}x")
        rows.append(f"| {name} | {int(np.median(Ns))} | {len(Ns)} | " + " | ".join(cells) + " |")
        print(rows[-1], file=sys.stderr)
    cmd = "python -m bench.sessions.anytime_cs_cost" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    head = " | ".join(f"RS-Mean ±{h} | CS ±{h} | ratio" for h in HALF_WIDTHS)
    md = "\n".join([
        BEGIN,
        "### What `stop.anytime_valid` costs in items (95%, uniform random order, n >= 10)",
        "",
        f"Command: `EVALPLAN_DATA_DIR={data_dir()} {cmd}`. Mean items until the 95% half-width is <= h: RS-Mean's "
        "fixed-n normal interval (finite-population corrected, what a random-sampling session reports) vs the "
        "hedged-capital betting confidence sequence (`stop.anytime_valid`, valid under continuous monitoring), "
        "on the same random order of each target's items (one order per target, random targets, seed "
        f"{args.seed}).",
        "",
        "| data set | N | targets | " + head + " |",
        "|---|---|---|" + "---|" * (3 * len(HALF_WIDTHS)),
        *rows,
        END,
    ])
    print(md)
    if args.write:
        write_section(args.write, md, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
