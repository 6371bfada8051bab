"""Coverage of the paired comparison ("is B better than A?", ``evalplan.core.sequential.paired``) on real models.

For each shared data set: pairs of real models (A, B) of three kinds (``random``: any two models;
``neighbours``: adjacent in the full-benchmark ranking, the small differences a CI system asks about;
``top``: two of the best 10% of models, the hard case), a uniform random subset of n items drawn
*without replacement*, and the level-95% paired interval on B - A from those n pairs. The truth is
the full-benchmark difference of the pair. Coverage = the share of draws whose interval holds the
truth (goal >= 93%). The anytime-valid confidence sequence (betting CS on the paired differences) is
checked on whole orders: covered = the truth inside the sequence at every n up to ``--cs-n``. Writes
the ``paired-coverage`` section of docs/RESULTS.md.

    nice -n 10 python -m bench paired_coverage --write docs/RESULTS.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from bench.common.markdown_sections import write_section
from bench.common.shared_data import load_scores
from evalplan.core.sequential.paired import paired_interval, paired_sequence

BEGIN, END = "<!-- paired-coverage -->", "<!-- /paired-coverage -->"
DATASETS = ("openllm_v2_musr", "openllm_v2_math_hard", "helm_lite_gsm", "helm_lite_math", "helm_lite_mmlu",
            "helm_lite_med_qa", "helm_lite_commonsense", "alpacaeval1")
SIZES = (25, 50, 100, 200, 400)
KINDS = ("random", "neighbours", "top")


def draw_pair(kind: str, ranking: np.ndarray, rng: np.random.Generator) -> tuple[int, int]:
    m = ranking.size
    if kind == "random":
        i, j = rng.choice(m, 2, replace=False)
    elif kind == "neighbours":
        r = int(rng.integers(0, m - 1))
        i, j = ranking[r], ranking[r + 1]
    else:
        top = ranking[-max(2, m // 10):]
        i, j = rng.choice(top, 2, replace=False)
    return (int(i), int(j)) if rng.random() < 0.5 else (int(j), int(i))


def run(name: str, reps: int, cs_reps: int, cs_n: int, seed: int) -> list[dict[str, object]]:
    X = load_scores(name)
    N = X.shape[1]
    means = X.mean(axis=1)
    ranking = np.argsort(means, kind="stable")
    lo, hi = float(np.min(X)), float(np.max(X))
    rng = np.random.default_rng(seed)
    rows: list[dict[str, object]] = []
    for kind in KINDS:
        for n in SIZES:
            if n >= N:
                continue
            hits, widths = 0, []
            for _ in range(reps):
                a, b = draw_pair(kind, ranking, rng)
                truth = float(means[b] - means[a])
                idx = rng.choice(N, n, replace=False)
                res = paired_interval(X[a, idx], X[b, idx], n_population=N, level=0.95)
                hits += res.interval[0] <= truth <= res.interval[1]
                widths.append(res.interval[1] - res.interval[0])
            rows.append({"data": name, "kind": kind, "n": n, "coverage": hits / reps,
                         "width": float(np.median(widths)), "reps": reps})
    n_seq = min(cs_n, N)
    held, final = 0, []
    for _ in range(cs_reps):
        a, b = draw_pair("random", ranking, rng)
        truth = float(means[b] - means[a])
        order = rng.permutation(N)[:n_seq]
        seq = paired_sequence(X[a, order], X[b, order], n_population=N, score_range=(lo, hi), level=0.95)
        held += all(s[0] - 1e-12 <= truth <= s[1] + 1e-12 for s in seq)
        final.append(seq[-1][1] - seq[-1][0])
    rows.append({"data": name, "kind": "anytime (random pairs)", "n": n_seq, "coverage": held / cs_reps,
                 "width": float(np.median(final)), "reps": cs_reps})
    return rows


def markdown(rows: list[dict[str, object]], args: argparse.Namespace, seconds: float) -> str:
    fixed = [r for r in rows if not str(r["kind"]).startswith("anytime")]
    lowest = min(fixed, key=lambda r: float(r["coverage"]))  # type: ignore[arg-type]
    pooled: dict[int, list[float]] = {}
    for r in fixed:
        pooled.setdefault(int(r["n"]), []).append(float(r["coverage"]))  # type: ignore[call-overload]
    lines = [BEGIN, "## Paired comparison: coverage on real model pairs (issue 26 §2)", "",
             f"`python -m bench paired_coverage --write docs/RESULTS.md` (seed {args.seed}, {args.reps} draws per "
             f"cell, {args.cs_reps} orders for the sequence, {seconds:.0f} s). B - A on n items drawn without "
             "replacement; truth = the pair's full-benchmark difference; nominal 95%, goal >= 93%. Pair kinds: "
             "`random`, `neighbours` (adjacent in the ranking), `top` (both in the best 10%).", "",
             "Mean coverage over data sets and pair kinds, by n: "
             + ", ".join(f"n={n}: {100 * float(np.mean(v)):.1f}%" for n, v in sorted(pooled.items()))
             + f". Lowest cell: {100 * float(lowest['coverage']):.1f}% ({lowest['data']}, {lowest['kind']}, "  # type: ignore[arg-type]
             f"n={lowest['n']}). Cells below 93%: {sum(float(r['coverage']) < 0.93 for r in fixed)} of "  # type: ignore[arg-type]
             f"{len(fixed)}.", "",
             "| data | pairs | n | coverage | median width |", "|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['data']} | {r['kind']} | {r['n']} | {100 * float(r['coverage']):.1f}% | "  # type: ignore[arg-type]
                     f"{float(r['width']):.3f} |")  # type: ignore[arg-type]
    lines += ["", "Anytime rows: the share of whole orders (n = 1 ... the row's n) whose confidence sequence held the "
              "truth at every n, and the median final width.", "",
              "<!-- interpretation -->", "<!-- /interpretation -->", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--cs-reps", type=int, default=100)
    ap.add_argument("--cs-n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    start = time.monotonic()
    rows: list[dict[str, object]] = []
    for i, name in enumerate(args.datasets):
        rows += run(name, args.reps, args.cs_reps, args.cs_n, args.seed + i)
        print(name, "done", f"{time.monotonic() - start:.0f}s", file=sys.stderr, flush=True)
    md = markdown(rows, args, time.monotonic() - start)
    print(md)
    if args.write:
        write_section(args.write, md, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
