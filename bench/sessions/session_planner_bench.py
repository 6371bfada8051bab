"""What the planner says a session needs vs what held-out models needed (issue 33 item 5).

``EVALPLAN_DATA_DIR=/work/shared/data nice -n 10 python -m bench.sessions.session_planner_bench
[--datasets a,b] [--half-widths 0.03,0.02] [--targets 4] [--held-out 6] [--write docs/RESULTS.md]``

Per shared data set and half-width: ``--held-out`` models drawn at random (seed 1) stand for new users' models
and are hidden from the planner; :func:`evalplan.core.backtest.session_planner.plan_session` sees only the other
models (what ``POST /v1/plans`` with ``session_targets: --targets`` sees when those are the stored references)
and states the default session's and ``random``'s items for random models. The truth: each held-out model run as
the default session and as ``random`` (:func:`~evalplan.core.backtest.session_planner.run_session`, the service's
estimators and stop) with every other model as a reference. Reported: planned vs realised mean items (and
their ratio), realised coverage at the stop, planned vs realised ``vs_random``. Each piece is kept as JSON under
``bench/results/session_planner/``; ``--write`` renders all kept pieces.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench.common.markdown_sections import INTERPRETATION, write_section
from bench.common.shared_data import load_scores
from evalplan.core.backtest.sequential_backtest import fill_reference_means
from evalplan.core.backtest.session_planner import BASELINE, holds, plan_session, run_session
from evalplan.core.sequential.methods import DEFAULT_METHOD
from evalplan.core.sequential.prior import BucketPrior
from evalplan.core.sequential.stopping import StopRule

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "bench" / "results" / "session_planner"
START, END = "<!-- session-planner -->", "<!-- /session-planner -->"
DATASETS = ("openllm_v2_musr", "openllm_v2_math_hard", "helm_lite_gsm", "helm_lite_math", "helm_lite_mmlu",
            "helm_lite_med_qa", "helm_lite_commonsense", "alpacaeval1")


def score_range(Y: np.ndarray) -> tuple[float, float]:
    finite = Y[np.isfinite(Y)]
    return (0.0, 1.0) if finite.min() >= 0 and finite.max() <= 1 else (-np.inf, np.inf)


def piece(name: str, half_width: float, n_targets: int, n_held_out: int, level: float = 0.95) -> dict:
    Y = np.asarray(load_scores(name), dtype=float)
    M, N = Y.shape
    rng = np.random.default_rng(1)
    held = np.sort(rng.choice(M, size=n_held_out, replace=False))
    refs = np.setdiff1d(np.arange(M), held)
    bounds = score_range(Y)
    t0 = time.perf_counter()
    plan = plan_session(Y[refs], half_width, level, score_range=bounds, n_targets=n_targets)
    plan_seconds = time.perf_counter() - t0
    rule = StopRule(half_width=half_width, level=level)
    truth: dict[str, list[dict]] = {DEFAULT_METHOD: [], BASELINE: []}
    for t in held:
        cols = ~np.isnan(Y[t])
        prior = BucketPrior.from_reference_scores(fill_reference_means(np.delete(Y, t, axis=0)[:, cols]))
        scores = Y[t, cols]
        for method in truth:
            n, est, lo, hi, reached = run_session(prior, scores, method, rule, bounds, seed=0)
            truth[method].append({"model": int(t), "items": n, "covered": holds(lo, hi, float(scores.mean())),
                                  "reached": reached})
    interp = plan["regimes"]["random_models"]
    ours = float(np.mean([r["items"] for r in truth[DEFAULT_METHOD]]))
    theirs = float(np.mean([r["items"] for r in truth[BASELINE]]))
    return {"data": name, "half_width": half_width, "n_items": N, "n_models": M, "targets": n_targets,
            "held_out": n_held_out, "planned_items": interp["items"], "planned_random_items": interp["random"]["items"],
            "planned_vs_random": interp["vs_random"], "planned_best_items": plan["best_models"]["items"],
            "planned_items_upper": interp["items_upper"], "planned_per_target": [r["items"] for r in interp["runs"]],
            "planned_coverage": interp["coverage_at_stop"], "plan_seconds": plan_seconds,
            "realised_items": ours, "realised_random_items": theirs, "realised_vs_random": ours / theirs,
            "realised_coverage": float(np.mean([r["covered"] for r in truth[DEFAULT_METHOD]])),
            "realised_random_coverage": float(np.mean([r["covered"] for r in truth[BASELINE]])),
            "truth": truth}


def upper(row: dict) -> str:
    return "n/a" if row.get("planned_items_upper") is None else f"{row['planned_items_upper']:.0f}"


def under(row: dict) -> str:
    if row.get("planned_items_upper") is None:
        return "n/a"
    return "yes" if row["realised_items"] <= row["planned_items_upper"] else "no"


def render(rows: list[dict]) -> str:
    head = ("<!-- written by `EVALPLAN_DATA_DIR=/work/shared/data nice -n 10 python -m "
            "bench.sessions.session_planner_bench --write docs/RESULTS.md` -->\n"
            "### What the planner says a session needs vs held-out models (issue 33 item 5)\n\n"
            "Protocol: `bench/sessions/session_planner_bench.py`'s docstring. `planned` = `POST /v1/plans`' `session` "
            "block (held-out references replayed as the default session and `random`, random models) computed "
            "without the held-out models; `realised` = those models run as sessions with every other model as a "
            "reference. Items are means to the first n >= 10 with the 95% half-width <= h.\n\n"
            "`planned upper` = the plan's `items_upper` (one-sided 90% Student-t bound of the mean over its targets).\n\n"
            "| data set | N | h | planner targets / held-out models | planned items (random) | planned upper | realised "
            "items (random) | realised / planned | realised <= upper | planned vs random | realised vs random | "
            "realised coverage: default / random | planner seconds |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in sorted(rows, key=lambda r: (r["targets"], -r["half_width"],
                                         DATASETS.index(r["data"]) if r["data"] in DATASETS else 99)):
        lines.append(
            f"| {r['data']} | {r['n_items']} | ±{r['half_width']:g} | {r['targets']} / {r['held_out']} | "
            f"{r['planned_items']:.0f} ({r['planned_random_items']:.0f}) | {upper(r)} | {r['realised_items']:.0f} "
            f"({r['realised_random_items']:.0f}) | {r['realised_items'] / r['planned_items']:.2f} | {under(r)} | "
            f"{r['planned_vs_random']:.2f}x | {r['realised_vs_random']:.2f}x | {r['realised_coverage']:.0%} / "
            f"{r['realised_random_coverage']:.0%} | {r['plan_seconds']:.0f} |")
    ratios = [r["realised_items"] / r["planned_items"] for r in rows]
    bounded = [r for r in rows if r.get("planned_items_upper") is not None]
    held = sum(r["realised_items"] <= r["planned_items_upper"] for r in bounded)
    foot = (f"\n\nOver {len(rows)} pieces: realised / planned items {min(ratios):.2f}-{max(ratios):.2f} (median "
            f"{float(np.median(ratios)):.2f}); the realised mean at or under the planned upper bound in {held} of "
            f"{len(bounded)} pieces that report one.\n" if rows else "\n")
    return START + "\n" + head + "\n".join(lines) + foot + "\n" + INTERPRETATION[0] + "\n" + INTERPRETATION[1] + \
        "\n" + END


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--half-widths", default="0.03,0.02")
    ap.add_argument("--targets", type=int, default=4)
    ap.add_argument("--held-out", type=int, default=6)
    ap.add_argument("--write", default=None)
    ap.add_argument("--render", action="store_true", help="only re-render the kept pieces")
    args = ap.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    if not args.render:
        for name in args.datasets.split(","):
            for h in (float(x) for x in args.half_widths.split(",")):
                t0 = time.perf_counter()
                row = piece(name, h, args.targets, args.held_out)
                (CACHE / f"{name}_h{h:g}_t{args.targets}.json").write_text(json.dumps(row, indent=1))
                print(f"{name} ±{h:g}: planned {row['planned_items']:.0f} realised {row['realised_items']:.0f} "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
    rows = [json.loads(p.read_text()) for p in sorted(CACHE.glob("*.json"))]
    text = render(rows)
    if args.write:
        write_section(ROOT / args.write, text, START, END)
    else:
        print(text)


if __name__ == "__main__":
    main()
