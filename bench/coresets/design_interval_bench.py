"""Design-based coreset intervals vs the calibrated rule, on held-out models, top decile apart (issue 25 §3).

``nice -n 10 python -m bench.coresets.design_interval_bench [--datasets a,b] [--seeds 60] [--budget 0.1]
[--level 0.9] --write docs/RESULTS.md`` runs every data set and writes the section (per data set pieces are
kept in ``bench/results/design_interval/``; ``--render`` only reassembles them).

Protocol, per data set and seed: :func:`evalplan.core.backtest.backtest.split_models` (30 stratified references,
every other model held out), a coreset of ``budget`` x N items chosen on the references:

* ``design`` (:mod:`evalplan.core.coresets.design_coreset`, ``params.interval: "design"``): items drawn stratified on the
  references' item means with recorded inclusion probabilities; each held-out model's estimate is the
  difference estimator on its scores at those items, the interval the design's (Student-t, Satterthwaite df);
* ``mrmr X% + design`` (``params.design_share``): mRMR's selection of X% of the budget, chosen on the
  references, is a take-all stratum (inclusion probability 1) and the rest of the budget is the design's
  draw from the other items; the same estimator and interval;
* ``mrmr+kernel_ridge`` and ``random+kernel_ridge`` with the service's default ``calibrated`` rule
  (:func:`evalplan.core.coresets.intervals.calibrated_half_width` on the references' cross-fitted and fixed-coreset
  errors, as ``bench.coresets.interval_calibration``, with the service's top-decile widening,
  :func:`evalplan.core.coresets.intervals.top_widened_interval`; ``..., no top widening`` is the rule without it); mRMR is left out on alpacaeval1 (one selection of its
  continuous scores takes about a minute and the rule refits it ten times).

Reported: held-out coverage of the ``level`` interval over all held-out models and over the top 10% of them by
true score (the issue's hard case), mean width and RMSE in points, pooled over seeds.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.markdown_sections import INTERPRETATION, write_section
from bench.common.shared_data import load_scores as load
from bench.coresets.interval_calibration import one_benchmark
from evalplan.core.backtest.backtest import split_models
from evalplan.core.coresets.design_coreset import design_coreset, design_estimate
from evalplan.core.coresets.intervals import calibrated_half_width, top_widened_interval
from evalplan.core.selection.score_based import SCORE_METHODS

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "bench" / "results" / "design_interval"
START, END = "<!-- design-interval -->", "<!-- /design-interval -->"
DATASETS = ("openllm_v2_musr", "openllm_v2_math_hard", "helm_lite_mmlu", "helm_lite_gsm", "helm_lite_math",
            "helm_lite_med_qa", "helm_lite_commonsense", "alpacaeval1")
NO_MRMR = ("alpacaeval1",)
TAKE_ALL_SHARES = (0.5, 0.25)  # share of the budget that mRMR's selection takes whole in ``mrmr+design``
RULES = ("design", *(f"mrmr {s:.0%} + design" for s in TAKE_ALL_SHARES), "mrmr+kernel_ridge",
         "mrmr+kernel_ridge, no top widening", "random+kernel_ridge", "random+kernel_ridge, no top widening")


def score_range(Y: np.ndarray) -> tuple[float, float]:
    """[0, 1] for scores inside it (every shared data set but none), else the scores' own range."""
    lo, hi = float(Y.min()), float(Y.max())
    return (0.0, 1.0) if lo >= 0.0 and hi <= 1.0 else (lo, hi)


def one_seed(Y: np.ndarray, seed: int, budget: float, level: float, no_mrmr: bool) -> dict[str, dict[str, list[float]]]:
    """{rule: {"truth", "estimate", "lower", "upper"}} over the held-out models of one split."""
    s = Y.mean(axis=1)
    ref, test = split_models(s, 30, "stratified", np.random.default_rng(seed))
    Yr, Yt = Y[ref], Y[test]
    truth = Yt.mean(axis=1)
    k = max(2, int(round(budget * Y.shape[1])))
    out: dict[str, dict[str, list[float]]] = {}
    design = design_coreset(Yr, k, seed=seed, score_range=score_range(Y))
    est = [design_estimate(design, y[design.items], level=level) for y in Yt]
    out["design"] = {"truth": truth.tolist(), "estimate": [e.estimate for e in est],
                     "lower": [e.lower for e in est], "upper": [e.upper for e in est]}
    for share in () if no_mrmr else TAKE_ALL_SHARES:
        fixed = SCORE_METHODS["mrmr"](k=int(round(share * k)), seed=seed).fit(Yr).ranking_
        d = design_coreset(Yr, k, seed=seed, score_range=score_range(Y), take_all=fixed)
        est = [design_estimate(d, y[d.items], level=level) for y in Yt]
        out[f"mrmr {share:.0%} + design"] = {"truth": truth.tolist(), "estimate": [e.estimate for e in est],
                                             "lower": [e.lower for e in est], "upper": [e.upper for e in est]}
    for method in ("mrmr", "random"):
        if method == "mrmr" and no_mrmr:
            continue
        (label, (err_t, cf, fixed)), = one_benchmark(Yr, Yt, method, seed, irt_epochs=0).items()
        h = calibrated_half_width(np.asarray(cf), np.asarray(fixed), level)
        center = truth - np.asarray(err_t)
        lo, hi, _ = top_widened_interval(center, np.asarray(cf), level, np.asarray(fixed), "calibrated",
                                         Yr.mean(axis=1))
        out[label] = {"truth": truth.tolist(), "estimate": center.tolist(), "lower": lo.tolist(), "upper": hi.tolist()}
        out[f"{label}, no top widening"] = {"truth": truth.tolist(), "estimate": center.tolist(),
                                            "lower": (center - h).tolist(), "upper": (center + h).tolist()}
    return out


def seed_counts(out: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """One seed's held-out models reduced to what the table needs, per rule (what a piece stores): models,
    hits, top-decile models and hits, summed width and squared error."""
    counts = {}
    for rule, r in out.items():
        t, e, lo, hi = (np.asarray(r[c], dtype=float) for c in ("truth", "estimate", "lower", "upper"))
        hit = (lo <= t) & (t <= hi)
        top = t >= np.quantile(t, 0.9)
        counts[rule] = {"n": int(t.size), "hits": int(hit.sum()), "n_top": int(top.sum()),
                        "top_hits": int(hit[top].sum()), "width": float((hi - lo).sum()),
                        "sq_error": float(np.square(e - t).sum())}
    return counts


def summarize(pieces: list[dict[str, dict[str, float]]], rule: str) -> dict[str, float] | None:
    rows = [p[rule] for p in pieces if rule in p]
    if not rows:
        return None
    n, n_top = sum(r["n"] for r in rows), sum(r["n_top"] for r in rows)
    return {"coverage": sum(r["hits"] for r in rows) / n, "top_coverage": sum(r["top_hits"] for r in rows) / n_top,
            "n_top": n_top, "n": n, "width": 100 * sum(r["width"] for r in rows) / n,
            "rmse": 100 * float(np.sqrt(sum(r["sq_error"] for r in rows) / n))}


def render(level: float) -> str:
    lines = [START, "## Design-based coreset intervals vs the calibrated rule, top decile apart (issue 25 §3)", "",
             "`nice -n 10 python -m bench.coresets.design_interval_bench --write docs/RESULTS.md` (pieces in "
             "`bench/results/design_interval/`). 30 stratified references, every other model held out, a coreset "
             "of the budget's share of the items chosen on the references; `design` = `evalplan.core.coresets.design_coreset` "
             "(stratified draw with recorded inclusion probabilities, difference estimator, Student-t interval), "
             "the others the service's `calibrated` rule with its top-decile widening (`, no top widening`: "
             "without). Coverage of the interval on all held-out models and on the "
             "top 10% of them by true score (n = held-out models x seeds); width and RMSE in points.", "",
             "| data set | budget | seeds | rule | coverage | top-10% coverage (n) | width | RMSE |",
             "|---|---|---|---|---|---|---|---|"]
    runs = []
    for path in sorted(CACHE.glob("*.json")):
        piece = json.loads(path.read_text())
        if piece["level"] != level:
            continue
        runs.append(f"{piece['dataset']} {piece['seconds']:.0f} s ({piece['ran']})")
        for rule in RULES:
            s = summarize(piece["seeds_out"], rule)
            if s is None:
                continue
            lines.append(f"| {piece['dataset']} | {piece['budget']:.0%} | {len(piece['seeds_out'])} | {rule} | "
                         f"{s['coverage']:.3f} | {s['top_coverage']:.3f} ({s['n_top']}) | {s['width']:.1f} | "
                         f"{s['rmse']:.2f} |")
    lines[1] = lines[1] + f", {level:.0%} intervals"
    lines += ["", f"Pieces (wall time on 2 shared cores, when): {'; '.join(runs)}.", "", INTERPRETATION[0],
              INTERPRETATION[1], END]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--seeds", type=int, default=60)
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--level", type=float, default=0.9)
    ap.add_argument("--render", action="store_true", help="only assemble the stored pieces")
    ap.add_argument("--write", default=None)
    args = ap.parse_args()
    if not args.render:
        CACHE.mkdir(parents=True, exist_ok=True)
        for name in args.datasets.split(","):
            t0 = time.perf_counter()
            Y = load(name)
            seeds_out = [seed_counts(one_seed(Y, seed, args.budget, args.level, name in NO_MRMR))
                         for seed in range(args.seeds)]
            piece: dict[str, Any] = {"dataset": name, "budget": args.budget, "level": args.level,
                                     "seconds": time.perf_counter() - t0,
                                     "ran": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "seeds_out": seeds_out}
            (CACHE / f"{name}.json").write_text(json.dumps(piece))
            print(name, f"{piece['seconds']:.0f} s", flush=True)
    section = render(args.level)
    print(section)
    if args.write:
        write_section(ROOT / args.write, section, START, END)


if __name__ == "__main__":
    main()
