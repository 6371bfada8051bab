"""Evidence bench of issue 11: every session method side by side on ../shared/data, held-out targets
replayed as sessions (``evalplan.core.backtest.sequential_backtest``, what ``POST /v1/backtests`` with
``sequential: true`` runs).

Per data set and regime (interpolation, extrapolation as docs/RESULTS.md defines them): MAE and
coverage of the 95% interval at n = 25 / 50 / 100 / 200, items to half-width 0.02 and 0.01 (and
coverage there), then the issue's goals checked on the same run.

Each (data set, regime) is stored as JSON under ``bench/results/sequential_backtest/`` so that a long
run can be done in bounded pieces; ``--render`` (or ``--write``) builds the docs/RESULTS.md section
from every stored piece, naming each piece's methods and date. Full command:

    EVALPLAN_DATA_DIR=../shared/data nice -n 10 python -m bench.sessions.sequential_backtest_bench \\
        --datasets openllm_v2_musr openllm_v2_math_hard helm_lite_commonsense helm_lite_gsm helm_lite_math \\
                   helm_lite_med_qa helm_lite_mmlu alpacaeval1 --workers 2 --write docs/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.markdown_sections import write_section
from bench.common.pieces import load_pieces, piece_path
from bench.sessions.sequential_accuracy_bench import data_dir, load
from evalplan.core.backtest.sequential_backtest import REGIMES, run_sequential_backtest, session_estimators
from evalplan.core.sequential.stopping import StopRule

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "bench" / "results" / "sequential_backtest"
BEGIN, END = "<!-- sequential-backtest -->", "<!-- /sequential-backtest -->"
DATASETS = ("openllm_v2_musr", "openllm_v2_math_hard", "helm_lite_commonsense", "helm_lite_gsm", "helm_lite_math",
            "helm_lite_med_qa", "helm_lite_mmlu", "alpacaeval1")
BUDGETS = (25, 50, 100, 200)
HALF_WIDTHS = (0.02, 0.01)
DEFAULT_NAMES = ("refgp_v3", "refgp_v2", "refgp_ivr")  # the default method, when present (evalplan.core.sequential.DEFAULT_METHOD)
PEERS = ("proeval_bq", "fluid_irt")


def default_method() -> str | None:
    from evalplan.core import sequential

    return getattr(sequential, "DEFAULT_METHOD", None)


def run_piece(name: str, regime: str, args: argparse.Namespace) -> dict[str, Any]:
    _, X = load(name)
    table = session_estimators()
    methods = args.methods or list(table)
    t0 = time.perf_counter()
    out = run_sequential_backtest(X, {m: table[m] for m in methods}, regime=regime, n_targets=args.targets,
                                  budgets=BUDGETS, stops=[StopRule(h) for h in HALF_WIDTHS], level=0.95,
                                  max_items=args.max_items, ref_cap=args.ref_cap, seed=args.seed,
                                  workers=args.workers)
    out["seconds"] = time.perf_counter() - t0
    out["dataset"] = name
    out["methods"] = methods
    out["default_method"] = default_method()
    out["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out["machine"] = f"{platform.machine()}, {os.cpu_count()} CPU cores (shared), Python {platform.python_version()}"
    out["args"] = {"targets": args.targets, "ref_cap": args.ref_cap, "seed": args.seed, "max_items": args.max_items,
                   "workers": args.workers}
    return out


def _x100(v: Any) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{100 * v:.2f}"


def _pct(v: Any) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{100 * v:.0f}%"


def render(pieces: list[dict[str, Any]]) -> str:
    lines = [BEGIN, "<!-- written by `python -m bench.sessions.sequential_backtest_bench --write docs/RESULTS.md` -->",
             "### Sequential sessions, every method side by side: held-out targets replayed as sessions (issue 11)",
             "",
             "Engine: `evalplan.core.backtest.sequential_backtest.run_sequential_backtest` (= `POST /v1/backtests` with "
             "`sequential: true`). Full command in `bench/sessions/sequential_backtest_bench.py`'s docstring; each "
             "(data set, regime) piece below names its methods and when it ran. Protocol: interpolation = "
             "random targets, references = the other models (at most 100, drawn at random); extrapolation = "
             "the best models by full-benchmark mean, the next 20% by rank discarded, references = the rest "
             "(at most 100). One session per (target, method) that never stops on precision, run for "
             "max(200, 30% of the items) items; MAE x100 and coverage of the 95% interval after n items; "
             "items to ±h = first n >= 10 with 95% half-width <= h, censored at the session length "
             "(`reached` = fraction of targets that met it; coverage at that stop over those).",
             ""]
    head = (["data set", "regime", "method"] + [f"MAE n={b}" for b in BUDGETS] + [f"cov n={b}" for b in BUDGETS]
            + [x for h in HALF_WIDTHS for x in (f"items to ±{h} (% of N)", f"reached ±{h}", f"cov at ±{h}")])
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in pieces:
        N = p["setup"]["n_items"]
        for row in p["rows"]:
            cells = [p["dataset"], p["setup"]["regime"], row["method"]]
            cells += [_x100(row["mae"][str(b)]) for b in BUDGETS] + [_pct(row["coverage"][str(b)]) for b in BUDGETS]
            for st in row["stops"]:
                cells += [f"{st['mean_items']:.0f} ({100 * st['mean_items'] / N:.0f}%)", _pct(st["reached"]),
                          _pct(st["coverage_at_stop"])]
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "#### Pieces (setup of each run)", "",
              "| data set | regime | models | items N | targets | references | gap | session length | methods | "
              "ran | seconds |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in pieces:
        s = p["setup"]
        lines.append(f"| {p['dataset']} | {s['regime']} | {s['n_models']} | {s['n_items']} | {s['n_targets']} | "
                     f"{s['n_references']} | {s['gap']} | {s['n_max']} | {', '.join(p['methods'])} | {p['date']} | "
                     f"{p['seconds']:.0f} |")
    lines += ["", "#### Goals of issue 11, checked on these runs", ""] + goals(pieces)
    lines += ["", "<!-- interpretation -->", "<!-- /interpretation -->", END]
    return "\n".join(lines)


BASELINES = ("bayesame", "bayesame_rs", "rs_mean")  # the paper's family: not candidates for the default


def goal_figures(pieces: list[dict[str, Any]], method: str, peers: tuple[str, ...] = PEERS) -> dict[str, Any]:
    """The three goals of issue 11 for ``method`` over ``pieces``: ``mae`` (per piece: (label, wins,
    cells, misses as (n, peer, ours, theirs))), ``coverage`` ((label, half_width, coverage at stop,
    targets that reached the rule) where some did) and ``precision`` ((label, mean fraction of N, reached) of
    the ±0.02 rule on benchmarks with N >= 756). ``peers``: whom goal 1 compares with."""
    mae, covs, big = [], [], []
    for p in pieces:
        rows = {r["method"]: r for r in p["rows"]}
        if method not in rows:
            continue
        label = f"{p['dataset']} {p['setup']['regime']}"
        wins, cells, misses = 0, 0, []
        for peer in peers:
            if peer not in rows:
                continue
            for b in BUDGETS:
                cells += 1
                d, q = rows[method]["mae"][str(b)], rows[peer]["mae"][str(b)]
                if d is not None and q is not None and d < q:
                    wins += 1
                else:
                    misses.append((b, peer, d, q))
        if cells:
            mae.append((label, wins, cells, misses))
        for st in rows[method]["stops"]:
            c = st["coverage_at_stop"]
            if c is not None and math.isfinite(c):
                covs.append((label, st["half_width"], c, int(round(st["reached"] * p["setup"]["n_targets"]))))
        N = p["setup"]["n_items"]
        if N >= 756:
            st = next(s for s in rows[method]["stops"] if s["half_width"] == 0.02)
            big.append((label, st["mean_items"] / N, st["reached"]))
    return {"mae": mae, "coverage": covs, "precision": big}


def _misses(misses: list[tuple[int, str, Any, Any]]) -> str:
    """``behind proeval_bq at n=25/50 (by 0.43-0.61 points)``, one clause per peer."""
    out = []
    for peer in PEERS:
        m = [x for x in misses if x[1] == peer]
        if not m:
            continue
        gaps = [100 * (d - q) for _, _, d, q in m if d is not None and q is not None]
        by = (f" by {min(gaps):.2f}" + (f"-{max(gaps):.2f}" if max(gaps) - min(gaps) >= 0.005 else "")
              + " points" if gaps else "")
        out.append(f"behind {peer} at n={'/'.join(str(x[0]) for x in m)}{by}")
    return "; ".join(out)


def goals(pieces: list[dict[str, Any]]) -> list[str]:
    out = []
    current = default_method()  # this checkout's default when the pieces have its rows, else the pieces' own
    stored = next((p["default_method"] for p in pieces if p.get("default_method")), None)
    default = current if any(r["method"] == current for p in pieces for r in p["rows"]) else stored
    if default is None:
        return ["* No default method other than `bayesame` was on main when these pieces ran: the goals that "
                "compare the default with `proeval_bq` / `fluid_irt` are not checked yet."]
    g = goal_figures(pieces, default)
    beat, total = sum(x[1] for x in g["mae"]), sum(x[2] for x in g["mae"])
    out.append(f"* Goal 1, MAE below both peers at every n: `{default}` (the default) has a lower MAE than the "
               f"peer in {beat} of {total} (data set, regime, n, peer) cells; per piece: "
               + "; ".join(f"{lab} {w}/{c}" + (f" ({_misses(m)})" if m else "") for lab, w, c, m in g["mae"]) + ".")
    covs = g["coverage"]
    inside = [c for c in covs if 0.93 <= c[2] <= 0.97]
    out.append(f"* Goal 2, coverage of `{default}`'s 95% interval at stop within 93-97%: {len(inside)} of {len(covs)} "
               "(data set, regime, rule) cells with a target reaching the rule; outside: "
               + (", ".join(f"{lab} ±{h}: {_pct(c)} of {k}" for lab, h, c, k in covs if not 0.93 <= c <= 0.97) or "none")
               + " (coverage of the targets that reached the rule, of how many).")
    big = g["precision"]
    ok = [b for b in big if b[1] <= 0.15 and b[2] == 1.0]
    out.append(f"* Goal 3, ±2 points at 95% with at most 15% of the items (benchmarks with N >= 756; mean items, "
               f"every target reaching it): {len(ok)} of {len(big)}: "
               + ", ".join(f"{lab}: {100 * f:.0f}% (reached {100 * r:.0f}%)" for lab, f, r in big) + ".")
    candidates = [m for m in dict.fromkeys(r["method"] for p in pieces for r in p["rows"])
                  if m not in PEERS and m not in BASELINES]
    if candidates:
        out += ["", "The same goals for every candidate estimator (neither a peer nor the BayesAME family), over "
                "the pieces that have it:", "",
                "| method | pieces | goal 1: MAE cells below the peer | goal 2: stop coverage in 93-97% "
                "(median, range) | goal 3: ±0.02 with <= 15% of N, all reaching | not a goal: MAE cells below "
                "`rs_mean` (uniform items, sample mean) |", "|---|---|---|---|---|---|"]
        for m in candidates:
            g = goal_figures(pieces, m)
            c = [x[2] for x in g["coverage"]]
            cov = (f"{sum(0.93 <= x <= 0.97 for x in c)} of {len(c)} ({_pct(float(np.median(c)))}, "
                   f"{_pct(min(c))}-{_pct(max(c))})" if c else "n/a")
            ok = sum(1 for _, f, r in g["precision"] if f <= 0.15 and r == 1.0)
            rs = goal_figures(pieces, m, peers=("rs_mean",))["mae"]
            out.append(f"| `{m}`{' (default)' if m == default else ''} | {len(g['mae'])} | "
                       f"{sum(x[1] for x in g['mae'])} of {sum(x[2] for x in g['mae'])} | {cov} | "
                       f"{ok} of {len(g['precision'])} | {sum(x[1] for x in rs)} of {sum(x[2] for x in rs)} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--regimes", nargs="+", default=list(REGIMES), choices=list(REGIMES))
    ap.add_argument("--methods", nargs="+", default=None, help="default: every session method on this checkout")
    ap.add_argument("--targets", type=int, default=20)
    ap.add_argument("--ref-cap", type=int, default=100)
    ap.add_argument("--max-items", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--store", type=Path, default=STORE, help="where the pieces are kept")
    ap.add_argument("--drop", nargs="+", default=[], help="with --merge: drop these methods' stored rows first "
                                                          "(to rerun them on newer code)")
    ap.add_argument("--merge", action="store_true",
                    help="keep stored pieces and run only the methods they lack (same targets: same seed/args)")
    ap.add_argument("--render", action="store_true", help="only rebuild the section from the stored pieces")
    ap.add_argument("--write", type=Path, help="write the section into this markdown file")
    args = ap.parse_args(argv)
    if not args.render:
        args.store.mkdir(parents=True, exist_ok=True)
        for name in args.datasets:
            for regime in args.regimes:
                path = piece_path(args.store, name, regime)
                if args.merge and not path.exists():
                    continue
                old = json.loads(path.read_text()) if args.merge and path.exists() else None
                if old is not None and args.drop:
                    old["rows"] = [r for r in old["rows"] if r["method"] not in args.drop]
                    old["targets"] = [t for t in old["targets"] if t["method"] not in args.drop]
                    old["methods"] = [m for m in old["methods"] if m not in args.drop]
                if old is not None:  # add the methods this piece lacks (same split: same seed and args)
                    missing = [m for m in (args.methods or list(session_estimators())) if m not in old["methods"]]
                    if not missing:
                        continue
                    args.methods, keep = missing, args.methods
                    new = run_piece(name, regime, args)
                    args.methods = keep
                    assert new["setup"]["n_targets"] == old["setup"]["n_targets"]
                    old["rows"] += new["rows"]
                    old["targets"] += new["targets"]
                    old["methods"] += new["methods"]
                    old["seconds"] += new["seconds"]
                    old["date"] += f"; {', '.join(missing)}: {new['date']}"
                    old["default_method"] = new["default_method"]
                    piece = old
                else:
                    piece = run_piece(name, regime, args)
                path.write_text(json.dumps(piece, default=float, allow_nan=True))
                print(f"{name} {regime}: {piece['seconds']:.0f} s", file=sys.stderr)
    md = render(load_pieces(args.store, DATASETS))
    print(md)
    if args.write:
        write_section(args.write, md, BEGIN, END)
    print(f"data: {data_dir()}; numpy {np.__version__}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
