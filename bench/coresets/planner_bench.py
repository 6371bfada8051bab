"""The budget planner's recommendation vs the backtested truth on held-out models (issue 16 §4).

``nice -n 10 python -m bench.coresets.planner_bench [--datasets a,b] [--half-widths 0.03,0.05] [--level 0.9]
[--methods random,anchor_points] [--seeds 2] [--write docs/RESULTS.md]``

Per shared data set (read in place from EVALPLAN_DATA_DIR, default ../shared/data) and seed, the
models are split at random into references (``--ref-frac``, at most ``--max-refs``) and held-out
models. :func:`evalplan.core.backtest.planner.plan_benchmark` sees only the references and recommends (method,
budget) for each requested half-width. The truth is measured on the held-out models, which the
planner never saw: each candidate's coreset is selected on all references at every grid budget, its
predictor fitted on the references, and its interval calibrated as the service does (score-based
methods: the default ``calibrated`` rule on the references' cross-fitted errors and the chosen
coreset's leave-one-reference-out errors, the width the planner now plans with; random: the
finite-population interval);
then on the held-out models we record

* at the planned budget: held-out RMSE, the ``level`` quantile of |error| (the realized half-width)
  and the coverage of the interval the coreset reports;
* the truly smallest budget: the smallest grid budget at which some candidate's held-out ``level``
  quantile of |error| is <= the requested half-width.

"planned <= truth" would mean the planner under-spends (its promise fails on new models); the
"realized half-width" column says by how much.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from bench.common.markdown_sections import INTERPRETATION, write_section
from bench.common.shared_data import load_scores as load
from evalplan.core.backtest.backtest import _factory, _fixed_errors, _select, _selection_aware_errors
from evalplan.core.backtest.planner import FULL, PLANNER_PARAMS, budget_grid, parse_candidate, plan_benchmark
from evalplan.core.coresets.intervals import interval_from_errors
from evalplan.core.coresets.prediction import estimate_from_coreset

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- planner -->", "<!-- /planner -->"
DATASETS = ("openllm_v2_musr", "openllm_v2_math_hard", "helm_lite_gsm", "helm_lite_math", "helm_lite_mmlu",
            "helm_lite_med_qa", "helm_lite_commonsense", "alpacaeval1")



def held_out(Y_ref: np.ndarray, Y_test: np.ndarray, method: str, predictor: str, k: int, seed: int,
             level: float) -> tuple[np.ndarray, np.ndarray]:
    """(held-out errors, interval half-widths) of the coreset the service would build on ``Y_ref``."""
    s_ref, s_test = Y_ref.mean(axis=1), Y_test.mean(axis=1)
    params = PLANNER_PARAMS.get(method, {})
    if method == "random":
        idx, _, _ = _select("random", Y_ref, k, seed, {})
        N = Y_ref.shape[1]
        binary = bool(np.all((Y_ref == 0) | (Y_ref == 1)))
        err, half = np.empty(len(s_test)), np.empty(len(s_test))
        for i in range(len(s_test)):
            est = estimate_from_coreset(Y_test[i, idx], np.zeros(k, dtype=np.int64), [N], level=level,
                                        binary=binary)["benchmarks"][0]
            err[i] = s_test[i] - est["estimate"]
            half[i] = (est["interval"][1] - est["interval"][0]) / 2
        return err, half
    idx, w, _ = _select(method, Y_ref, k, seed, params)
    if predictor == "weighted_mean" and w is None:
        w = np.full(k, 1.0 / k)
    pred = _factory(predictor, w)().fit(Y_ref[:, idx], s_ref).predict(Y_test[:, idx])
    e_cal = _selection_aware_errors(method, predictor, Y_ref, s_ref, k, seed, params, {})
    fixed = _fixed_errors(predictor, Y_ref[:, idx], s_ref, w, "calibrated")  # the default rule (issue 16 §2)
    lo, hi = interval_from_errors(0.0, e_cal, level, fixed, "calibrated")
    return s_test - np.asarray(pred), np.full(len(s_test), (hi - lo) / 2)


def run_one(name: str, Y: np.ndarray, half_widths: list[float], args: argparse.Namespace, seed: int) -> list[dict]:
    rng = np.random.default_rng([seed, 31])
    M = Y.shape[0]
    n_ref = min(args.max_refs, int(round(args.ref_frac * M)))
    perm = rng.permutation(M)
    ref, test = np.sort(perm[:n_ref]), np.sort(perm[n_ref:])
    Y_ref, Y_test = Y[ref], Y[test]
    cands = [parse_candidate(m) for m in args.methods.split(",")]
    grid = budget_grid(Y.shape[1])
    truth: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}

    def truth_at(c, k):
        key = (c.method, k)
        if key not in truth:
            truth[key] = held_out(Y_ref, Y_test, c.method, c.predictor, k, seed, args.level)
        return truth[key]

    rows = []
    for h in half_widths:
        t0 = time.perf_counter()
        plan = plan_benchmark(Y_ref, h, args.level, cands, seeds=args.seeds, score_range=(0.0, 1.0),
                              max_seconds=args.max_seconds)
        secs = time.perf_counter() - t0
        row = {"dataset": name, "seed": seed, "h": h, "n_ref": n_ref, "n_test": len(test), "N": Y.shape[1],
               "planned_method": plan["label"], "planned_k": plan["budget"], "planned_rmse": plan["expected_rmse"],
               "planned_half": plan["half_width"], "stopped": plan["stopped"], "seconds": secs}
        if plan["method"] == FULL:
            row.update(test_rmse=0.0, test_q=0.0, test_cov=1.0)
        else:
            c = next(c for c in cands if c.method == plan["method"] and c.predictor == plan["predictor"])
            err, half = truth_at(c, plan["budget"])
            row.update(test_rmse=float(np.sqrt(np.mean(err**2))), test_q=float(np.quantile(np.abs(err), args.level)),
                       test_cov=float(np.mean(np.abs(err) <= half)))
        true_k, true_m = Y.shape[1], "full"
        for k in grid:  # the smallest budget whose held-out level-quantile of |error| is <= h
            ok = [c for c in cands if np.quantile(np.abs(truth_at(c, k)[0]), args.level) <= h]
            if ok:
                true_k, true_m = k, ok[0].label
                break
            if k > 2 * row["planned_k"] and k > row["planned_k"] + 50:
                true_k, true_m = -1, f"> {k}"  # not searched further (bounded run)
                break
        row.update(true_k=true_k, true_method=true_m)
        rows.append(row)
        print(row, flush=True)
    return rows


def table(rows: list[dict], level: float) -> str:
    head = ("| data set | refs / held-out | ± h | planned (method, items) | planned RMSE | planned half-width | "
            f"held-out RMSE | held-out {level:g}-quantile of abs error | held-out coverage | truly smallest (items) |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        true = "?" if r["true_k"] == -1 else f"{r['true_method']}, {r['true_k']}"
        if r["true_k"] == -1:
            true = r["true_method"]
        lines.append(f"| {r['dataset']} (seed {r['seed']}) | {r['n_ref']} / {r['n_test']} | {r['h']:g} | "
                     f"{r['planned_method']}, {r['planned_k']} of {r['N']} | {r['planned_rmse']:.4f} | "
                     f"{r['planned_half']:.4f} | {r['test_rmse']:.4f} | {r['test_q']:.4f} | {r['test_cov']:.2f} | "
                     f"{true} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--half-widths", default="0.03,0.05")
    ap.add_argument("--level", type=float, default=0.9)
    ap.add_argument("--methods", default="random,anchor_points")
    ap.add_argument("--seeds", type=int, default=2, help="planner seeds")
    ap.add_argument("--splits", type=int, default=1, help="reference/held-out splits per data set")
    ap.add_argument("--ref-frac", type=float, default=0.5)
    ap.add_argument("--max-refs", type=int, default=60)
    ap.add_argument("--max-seconds", type=float, default=None)
    ap.add_argument("--write", default=None)
    args = ap.parse_args()
    hs = [float(h) for h in args.half_widths.split(",")]
    rows: list[dict] = []
    t0 = time.perf_counter()
    for name in args.datasets.split(","):
        Y = load(name)
        for split in range(args.splits):
            rows += run_one(name, Y, hs, args, split)
    total = time.perf_counter() - t0
    n_under = sum(r["test_q"] > r["h"] for r in rows)
    cmd = (f"nice -n 10 python -m bench.coresets.planner_bench --datasets {args.datasets} --half-widths {args.half_widths} "
           f"--level {args.level:g} --methods {args.methods} --seeds {args.seeds} --splits {args.splits} "
           f"--ref-frac {args.ref_frac:g} --max-refs {args.max_refs} --write docs/RESULTS.md")
    section = "\n".join([
        START, "## Budget planner: recommendation vs held-out truth (issue 16 §4)", "",
        f"`{cmd}` ({total / 60:.1f} min on 2 shared cores). Per data set the models are split at random into "
        "references (what the planner sees) and held-out models (what it never sees). The planner "
        "(`evalplan.core.backtest.planner`, candidates "
        f"{args.methods}) recommends the smallest budget whose backtested {args.level:g} interval half-width on "
        "the references is <= ± h; the held-out columns build that coreset on all references and measure it on "
        "the held-out models. *Truly smallest* = the smallest grid budget at which some candidate's held-out "
        f"{args.level:g}-quantile of |error| is <= h (`> k`: not searched further). Scores on a 0-1 scale.", "",
        table(rows, args.level), "",
        f"Held-out {args.level:g}-quantile of |error| above the requested h (the promise broken on new models): "
        f"{n_under} of {len(rows)} plans.", "",
        INTERPRETATION[0], INTERPRETATION[1], END])
    print(section)
    if args.write:
        write_section(ROOT / args.write, section, START, END)


if __name__ == "__main__":
    main()
