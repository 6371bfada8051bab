"""Paired comparison sessions (``compare_to``, issue 33 item 2): how often the decision is wrong and how many
items it costs, against two independent ``random`` sessions, on the checkpoint series of
``bench/sessions/checkpoint_series_bench.py`` (release series: the latest release vs the one before it;
pseudo-checkpoints: the target T vs its checkpoint 4 of 5, fully scored, or scored on a random 20% of the items,
i.e. compared to an earlier session).

Each (case, seed) runs :class:`evalplan.core.sequential.paired.PairedSession` exactly as ``POST /v1/sessions`` with
``compare_to`` and ``delta`` does (uniform draws from the comparator's scored items, the betting confidence
sequence on the paired differences, a stop at the first n >= 10 whose interval supports better / worse /
within +-delta). A decision is wrong when the true difference on those items (known here) contradicts it.
The baseline is two independent ``random`` sessions (exact finite-population interval), one on the target and
one on the comparator, each run until its own 95% interval is within ±delta: the items a caller would spend
to measure both to ±delta separately (their difference is then still about ±1.4 delta wide, so the
baseline is generous to ``random``). Complete comparators only for the baseline.

    EVALPLAN_DATA_DIR=../shared/data nice -n 10 python -m bench.sessions.paired_decision_bench --write docs/RESULTS.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import hypergeom

from bench.common.markdown_sections import write_section
from bench.sessions.checkpoint_series_bench import cases
from bench.sessions.sequential_accuracy_bench import data_dir, load
from evalplan.core.sequential.paired import PairedSession

BEGIN, END = "<!-- paired-decision -->", "<!-- /paired-decision -->"
KINDS = {"release": "release series (latest vs previous release)",
         "pseudo: checkpoint 4 only": "pseudo-checkpoints (T vs checkpoint 4, complete)",
         "pseudo: checkpoint 4 on 20% of items": "pseudo-checkpoints (T vs checkpoint 4 seen on 20% of items)"}


def paired_run(comparator: np.ndarray, target: np.ndarray, delta: float, seed: int) -> dict[str, Any]:
    s = PairedSession(comparator, score_range=(0.0, 1.0), delta=delta, seed=seed)
    while not s.stopped:
        item = s.propose()[0]
        s.observe(item, float(target[item]))
    have = ~np.isnan(comparator)
    truth = float(np.mean(target[have] - comparator[have]))
    right = None if s.decision is None else {"better": truth > 0, "worse": truth < 0,
                                              "within": abs(truth) <= delta}[s.decision]
    return {"items": s.n_observed, "population": int(have.sum()), "decision": s.decision, "right": right,
            "truth": truth}


def exact_half_width(k: int, n: int, N: int, level: float = 0.95) -> float:
    """Half-width of ``random``'s exact finite-population interval for k successes in n of N binary items
    (the hypergeometric inversion of ``RandomEstimator.interval``)."""
    K = np.arange(N + 1)
    alpha = 1.0 - level
    ok = np.flatnonzero((hypergeom.sf(k - 1, N, K, n) > alpha / 2) & (hypergeom.cdf(k, N, K, n) > alpha / 2))
    return 0.0 if not ok.size else float(ok[-1] - ok[0]) / N / 2.0


def random_items(scores: np.ndarray, half_width: float, seed: int, min_items: int = 10) -> int:
    """Items a ``random`` session (uniform order, exact finite-population interval for binary scores) needs for a
    95% interval within ±half_width (N when never): the normal finite-population interval finds the region,
    the exact one decides (both computed on the same uniform order)."""
    N = scores.size
    y = scores[np.random.default_rng([seed, 5]).permutation(N)]
    n = np.arange(1, N + 1)
    mean = np.cumsum(y) / n
    s2 = np.maximum(np.cumsum(y * y) - n * mean * mean, 0.0) / np.maximum(n - 1, 1)
    normal = 1.96 * np.sqrt((1.0 - n / N) * s2 / n)
    hits = np.flatnonzero((normal <= half_width) & (n >= min_items))
    if not np.isin(y, (0.0, 1.0)).all():
        return int(hits[0] + 1) if hits.size else N
    start = max(min_items, int(hits[0] + 1) - 40) if hits.size else min_items
    k = np.cumsum(y).astype(int)
    for m in range(start, N + 1):
        if exact_half_width(int(k[m - 1]), m, N) <= half_width:
            return m
    return N


def lockstep_items(target: np.ndarray, comparator: np.ndarray, delta: float, seed: int,
                   min_items: int = 10) -> tuple[int, bool | None]:
    """Items two independent ``random`` sessions (target and comparator, independent uniform orders) spend until
    the normal interval of their difference, ``sqrt(v_t + v_c)`` with finite-population variances, supports a
    decision by the same rule as the paired session (both sessions' items counted; 2N when never). Looked at after
    every pair without any correction, so it decides earlier than a valid rule would: generous to ``random``.
    Returns (items, whether its decision is right; None without one)."""
    N = target.size
    n = np.arange(1, N + 1)

    def path(y: np.ndarray, stream: int) -> tuple[np.ndarray, np.ndarray]:
        z = y[np.random.default_rng([seed, stream]).permutation(N)]
        mean = np.cumsum(z) / n
        s2 = np.maximum(np.cumsum(z * z) - n * mean * mean, 0.0) / np.maximum(n - 1, 1)
        return mean, (1.0 - n / N) * s2 / n

    mt, vt = path(target, 1)
    mc, vc = path(comparator, 2)
    diff, half = mt - mc, 1.96 * np.sqrt(vt + vc)
    lo, hi = diff - half, diff + half
    ok = (lo > 0) | (hi < 0) | ((lo >= -delta) & (hi <= delta))
    ok &= (n >= min_items) & (vt > 0) & (vc > 0)
    hits = np.flatnonzero(ok)
    if not hits.size:
        return 2 * N, None
    k = int(hits[0])
    truth = float(np.mean(target - comparator))
    right = truth > 0 if lo[k] > 0 else truth < 0 if hi[k] < 0 else abs(truth) <= delta
    return 2 * (k + 1), bool(right)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=["openllm_v2_musr", "openllm_v2_math_hard"])
    ap.add_argument("--pseudo", type=int, default=8, help="pseudo-checkpoint targets per data set")
    ap.add_argument("--seeds", type=int, default=5, help="paired sessions per case")
    ap.add_argument("--delta", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = []
    totals: dict[str, list[Any]] = {"runs": [], "ratios": [], "lock": []}
    for name in args.datasets:
        names, X = load(name)
        groups: dict[str, dict[str, list[Any]]] = {}
        for case in cases(name, X, names, args.pseudo, args.seed):
            if case["kind"] not in KINDS:
                continue
            target = case["target"]
            cols = ~np.isnan(target)
            target = target[cols]
            comparator = case["previous"][-1][cols]
            complete = not np.isnan(comparator).any()
            g = groups.setdefault(case["kind"], {"runs": [], "random": [], "agree": []})
            g["agree"].append(case["agree"])
            for s in range(args.seeds):
                run = paired_run(comparator, target, args.delta, s)
                g["runs"].append(run)
                if complete:
                    pair = random_items(target, args.delta, s) + random_items(comparator, args.delta, s)
                    g["random"].append((run["items"], pair, lockstep_items(target, comparator, args.delta, s)))
            print(name, case["kind"], case["label"], f"{time.perf_counter() - t0:.0f}s", file=sys.stderr)
        for kind, g in groups.items():
            runs = g["runs"]
            decided = [r for r in runs if r["decision"] is not None]
            wrong = [r for r in decided if not r["right"]]
            counts = {d: sum(r["decision"] == d for r in runs) for d in ("better", "worse", "within")}
            items = np.array([r["items"] for r in runs], dtype=float)
            frac = np.array([r["items"] / r["population"] for r in runs])
            cells = [name, KINDS[kind], str(len(runs) // args.seeds), f"{100 * np.mean(g['agree']):.0f}%",
                     f"{100 * np.mean([abs(r['truth']) for r in runs]):.1f}",
                     f"{items.mean():.0f} / {np.median(items):.0f} ({100 * frac.mean():.0f}%)",
                     f"{counts['better']} / {counts['worse']} / {counts['within']} / {len(runs) - len(decided)}",
                     f"{len(wrong)} of {len(runs)} ({100 * len(wrong) / len(runs):.1f}%)"]
            if g["random"]:
                paired_items = float(np.mean([a for a, _, _ in g["random"]]))
                two = float(np.mean([b for _, b, _ in g["random"]]))
                lock = float(np.mean([c[0] for _, _, c in g["random"]]))
                lock_wrong = sum(c[1] is False for _, _, c in g["random"])
                cells += [f"{two:.0f}", f"{paired_items / two:.2f}",
                          f"{lock:.0f} ({lock_wrong} of {len(g['random'])} wrong)", f"{paired_items / lock:.2f}"]
                totals["ratios"].append(paired_items / two)
                totals["lock"].append(paired_items / lock)
            else:
                cells += ["n/a (partial comparator)", "n/a", "n/a", "n/a"]
            totals["runs"].extend(runs)
            rows.append("| " + " | ".join(cells) + " |")
    runs = totals["runs"]
    decided = [r for r in runs if r["decision"] is not None]
    wrong = sum(not r["right"] for r in decided)
    cmd = "python -m bench.sessions.paired_decision_bench" + (
        " " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    head = ["data set", "series", "cases", "agreement", "mean |true difference| x100",
            "paired items: mean / median (share of the comparator's items)",
            "decisions better / worse / within / none", "wrong decisions",
            "two random sessions to ±delta: items", "paired / those",
            "two random sessions deciding together: items (wrong decisions)", "paired / those"]
    summary = (f"Over all {len(runs)} paired sessions: {wrong} wrong decisions ({100 * wrong / max(len(runs), 1):.1f}%), "
               f"{len(runs) - len(decided)} without a decision at the end; paired items / two random sessions' "
               f"items to ±delta: {', '.join(f'{r:.2f}' for r in totals['ratios']) or 'n/a'}; / two random sessions "
               f"deciding together: {', '.join(f'{r:.2f}' for r in totals['lock']) or 'n/a'} per row with a complete "
               "comparator (goal: wrong <= 5%, ratio <= 0.33).")
    md = "\n".join([
        BEGIN,
        f"### Paired decisions: `compare_to` with `delta: {args.delta}` (issue 33 item 2)",
        "",
        f"Command: `EVALPLAN_DATA_DIR={data_dir()} nice -n 10 {cmd}` ({time.perf_counter() - t0:.0f} s). Cases as in "
        "`bench/sessions/checkpoint_series_bench.py` (release series; pseudo-checkpoints mixing a target T and a weaker "
        f"model W); {args.seeds} paired sessions (seeds) per case, each run as `POST /v1/sessions` with `compare_to` "
        "runs it (`evalplan.core.sequential.paired.PairedSession`). Wrong: the decision contradicts the true difference on the "
        "comparator's items. Baselines (complete comparators): a `random` session on the target plus one on the "
        "comparator, each to its own 95% ±delta (exact finite-population interval); and the two run together until "
        "the normal interval of their difference supports a decision by the same rule (looked at after every pair "
        "without correction: generous to `random`).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *rows,
        "",
        summary,
        END,
    ])
    print(md)
    if args.write:
        write_section(args.write, md, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
