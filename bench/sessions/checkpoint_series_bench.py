"""Checkpoint series (issue 11 §5): does ``previous: [earlier checkpoints]`` make a later checkpoint
need markedly fewer items for the same precision? Built from ../shared/data, two kinds of series:

* **release series** (real, no construction): successive public releases of one model line, all
  scored in the Open LLM Leaderboard v2 data (``SERIES``); the target is the latest release, the
  previous ones are its ``previous``. These are separate fine-tuning runs, not checkpoints of one
  run, so they are the hard case (their item-level agreement with the target is in the table).
* **pseudo-checkpoints** (constructed): a training run from a weaker model W to the target T.
  Each item i gets a fixed random time ``u_i ~ U(0, 1)``; checkpoint k of K = 5 has T's real score
  on the items with ``u_i < k / K`` and W's real score elsewhere, so every checkpoint is real
  scores of real models and consecutive checkpoints differ on about a fifth of the items where T
  and W differ. Checkpoint 5 is T. The target is T with ``previous`` = checkpoints 1..4 (complete),
  or checkpoint 4 only (``last``), or checkpoint 4 observed on a random 20% of the items (``partial``:
  what an earlier session leaves). W is drawn uniformly among the models 5-15 points below T.

Each (target, method, prior) is one session (``evalplan.core.backtest.sequential_backtest.replay``) on the same
references (100 at most, drawn at random among the other models); the prior with checkpoints is
``evalplan.core.sequential.checkpoints.with_previous``, exactly what ``POST /v1/sessions`` builds.
Reported: mean items until the 95% half-width is <= 0.02 and <= 0.03 (censored at the session
length), MAE x100 at n = 25 / 50 / 100, coverage at the ±0.02 stop.

    EVALPLAN_DATA_DIR=../shared/data nice -n 10 python -m bench.sessions.checkpoint_series_bench --write docs/RESULTS.md
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.markdown_sections import write_section
from bench.sessions.sequential_accuracy_bench import data_dir, load
from evalplan.core.backtest.sequential_backtest import fill_reference_means, first_stop, replay, session_estimators
from evalplan.core.sequential import BucketPrior, SessionConfig
from evalplan.core.sequential.active_design import ActiveDesignEstimator
from evalplan.core.sequential.checkpoints import with_previous
from evalplan.core.sequential.stopping import StopRule

BEGIN, END = "<!-- checkpoint-series -->", "<!-- /checkpoint-series -->"
SERIES = [
    ["Intel/neural-chat-7b-v3", "Intel/neural-chat-7b-v3-1", "Intel/neural-chat-7b-v3-2", "Intel/neural-chat-7b-v3-3"],
    ["TinyLlama/TinyLlama-1.1B-Chat-v0.1", "TinyLlama/TinyLlama-1.1B-Chat-v0.5", "TinyLlama/TinyLlama-1.1B-Chat-v0.6",
     "TinyLlama/TinyLlama-1.1B-Chat-v1.0"],
    ["mistralai/Mistral-7B-Instruct-v0.1", "mistralai/Mistral-7B-Instruct-v0.2", "mistralai/Mistral-7B-Instruct-v0.3"],
    ["lmsys/vicuna-7b-v1.3", "lmsys/vicuna-7b-v1.5"],
    ["WizardLMTeam/WizardLM-13B-V1.0", "WizardLMTeam/WizardLM-13B-V1.2"],
]
HWS = (0.02, 0.03)
BUDGETS = (25, 50, 100)
K = 5
LABELS = {"base": "{baseline}", "none": "no previous", "before": "previous in the prior (the default)",
          "prev": "previous + flip model (use_previous)"}


def session(prior: BucketPrior, scores: np.ndarray, method: str, n_max: int, seed: int = 0,
            previous: list[dict[str, Any]] | None = None, use_previous: bool | None = None) -> dict[Any, Any]:
    """One replayed session; ``use_previous`` (``active_design`` only): the checkpoint's flip model in the working
    model (``True``, opt-in) or ``previous`` in the prior only (``False``, the default)."""
    factory = session_estimators()[method]
    if use_previous is not None:
        factory = functools.partial(ActiveDesignEstimator, use_previous=use_previous)
    cfg = SessionConfig(method=method, seed=seed, stop={"half_width": 0.0, "level": 0.95, "min_items": 1},
                        previous=previous)
    est, lo, hi = replay(prior, scores, factory, cfg, level=0.95, score_range=(0.0, 1.0), n_max=n_max)
    truth = float(scores.mean())
    out: dict[Any, Any] = {"err": {b: abs(est[min(b, len(est)) - 1] - truth) for b in BUDGETS}}
    for h in HWS:
        n = first_stop(lo, hi, StopRule(h))
        out[h] = (n if n is not None else len(est), n is not None,
                  None if n is None else bool(lo[n - 1] <= truth <= hi[n - 1]))
    return out


def previous_config(previous: list[np.ndarray], weights: list[int]) -> list[dict[str, Any]]:
    """``SessionConfig.previous`` as ``POST /v1/sessions`` stores it (what the estimator reads)."""
    return [{"model": f"checkpoint {k + 1}", "n_scores": int(np.sum(~np.isnan(p))), "weight": int(m)}
            for k, (p, m) in enumerate(zip(previous, weights))]


def cases(name: str, X: np.ndarray, names: list[str], n_pseudo: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    idx = {n: i for i, n in enumerate(names)}
    means = np.nanmean(X, axis=1)
    out = []
    for ser in SERIES:
        ser = [s for s in ser if s in idx]
        if len(ser) < 2:
            continue
        t = X[idx[ser[-1]]]
        prev = [X[idx[s]] for s in ser[:-1]]
        out.append({"kind": "release", "label": ser[-1], "target": t, "previous": prev, "exclude": ser,
                    "agree": float(np.nanmean(prev[-1] == t))})
    for T in rng.choice(X.shape[0], size=n_pseudo, replace=False):
        weaker = np.flatnonzero((means < means[T] - 0.05) & (means > means[T] - 0.15))
        if not weaker.size:
            continue
        W = int(rng.choice(weaker))
        u = rng.random(X.shape[1])
        ck = [np.where(u < k / K, X[T], X[W]) for k in range(1, K)]
        partial = ck[-1].copy()
        partial[rng.random(X.shape[1]) >= 0.2] = np.nan
        for kind, prev in (("pseudo: checkpoints 1-4", ck), ("pseudo: checkpoint 4 only", ck[-1:]),
                           ("pseudo: checkpoint 4 on 20% of items", [partial])):
            out.append({"kind": kind, "label": f"{names[T]} (from {names[W]})", "target": X[T], "previous": prev,
                        "exclude": [names[T], names[W]], "agree": float(np.nanmean(ck[-1] == X[T]))})
    return out


def _case(task: tuple[Any, ...]) -> list[dict[str, dict[str, Any]]]:
    """Every session of one case: per seed, per method, {base, none, prev, before} -> the session's summary."""
    case, names, X, args, methods, n_max = task
    rng = np.random.default_rng(args.seed)
    pool = np.array([i for i, n in enumerate(names) if n not in case["exclude"]])
    refs = np.sort(rng.choice(pool, size=min(args.ref_cap, len(pool)), replace=False))
    R = fill_reference_means(X[refs])
    cols = ~np.isnan(case["target"])
    plain = BucketPrior.from_reference_scores(R[:, cols])
    prev = [p[cols] for p in case["previous"]]
    aug, mult = with_previous(R[:, cols], prev)
    warm = BucketPrior.from_reference_scores(aug)
    pcfg = previous_config(prev, mult)
    y = case["target"][cols]
    out = []
    for s in range(args.seeds):
        base = session(plain, y, args.baseline, n_max, seed=s) if args.baseline else None
        per: dict[str, dict[str, Any]] = {}
        for m in methods:
            runs = per.setdefault(m, {})
            if base is not None:
                runs["base"] = base
            if not args.no_none:
                runs["none"] = session(plain, y, m, n_max, seed=s)
            flip = True if m == "active_design" else None
            runs["prev"] = session(warm, y, m, n_max, seed=s, previous=pcfg, use_previous=flip)
            if args.before and m == "active_design":
                runs["before"] = session(warm, y, m, n_max, seed=s, previous=pcfg, use_previous=False)
        out.append(per)
    return out


def _items(runs: list[dict[Any, Any]], h: float) -> str:
    return f"{np.mean([r[h][0] for r in runs]):.0f} ({100 * np.mean([r[h][1] for r in runs]):.0f}%)"


def _coverage(runs: list[dict[Any, Any]], h: float) -> str:
    cov = [r[h][2] for r in runs if r[h][2] is not None]
    return f"{100 * np.mean(cov):.0f}% of {len(cov)}" if cov else "n/a"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=["openllm_v2_musr"])
    ap.add_argument("--methods", nargs="+", default=None, help="default: the default method")
    ap.add_argument("--baseline", default="random", help="run once per case without previous, beside the methods")
    ap.add_argument("--pseudo", type=int, default=6, help="pseudo-checkpoint targets per data set")
    ap.add_argument("--kinds", nargs="+", default=None, help="only these series kinds (release, pseudo: ...)")
    ap.add_argument("--before", action="store_true",
                    help="also run active_design with previous in the prior only (the default; the other column "
                         "adds the flip model, use_previous=True)")
    ap.add_argument("--no-none", action="store_true", help="skip the sessions without previous")
    ap.add_argument("--seeds", type=int, default=1, help="sessions (seeds) per case")
    ap.add_argument("--max-fraction", type=float, default=1.0,
                    help="session length: this fraction of the items (at least 100); the stop is censored there")
    ap.add_argument("--jobs", type=int, default=1, help="cases run in this many processes")
    ap.add_argument("--ref-cap", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    from evalplan.core import sequential

    methods = args.methods or [getattr(sequential, "DEFAULT_METHOD", "active_design")]
    t0 = time.perf_counter()
    rows = []
    shown = {"base": bool(args.baseline), "none": not args.no_none, "before": args.before, "prev": True}
    order = " / ".join(LABELS[k].format(baseline=args.baseline) for k in LABELS if shown[k])
    for name in args.datasets:
        names, X = load(name)
        n_max = min(X.shape[1], max(BUDGETS[-1], int(math.ceil(args.max_fraction * X.shape[1]))))
        groups: dict[tuple[str, str], dict[str, list[Any]]] = {}
        tasks = [(case, names, X, args, methods, n_max) for case in cases(name, X, names, args.pseudo, args.seed)
                 if not args.kinds or case["kind"] in args.kinds]
        with contextlib.ExitStack() as stack:
            results: Any = map(_case, tasks)
            if args.jobs > 1:
                results = stack.enter_context(multiprocessing.get_context("fork").Pool(args.jobs)).imap(_case, tasks)
            for (case, *_), per_seed in zip(tasks, results):
                for s_runs in per_seed:
                    for m, runs in s_runs.items():
                        g = groups.setdefault((case["kind"], m), {"agree": [], "none": [], "prev": [], "base": [],
                                                                  "before": []})
                        g["agree"].append(case["agree"])
                        for k, r in runs.items():
                            g[k].append(r)
                print(name, case["kind"], case["label"], f"{time.perf_counter() - t0:.0f}s", file=sys.stderr)
        for (kind, m), g in groups.items():
            cells = [name, kind, m, f"{len(g['prev']) // args.seeds} x {args.seeds}", f"{100 * np.mean(g['agree']):.0f}%"]
            cols = [(k, g[k]) for k in ("base", "none", "before", "prev") if g[k]]
            for h in HWS:
                cells.append(" / ".join(_items(runs, h) for _, runs in cols))
                ratio = (np.mean([r[h][0] for r in g["prev"]]) / np.mean([r[h][0] for r in g["base"]])
                         if g["base"] else math.nan)
                ratio_before = (np.mean([r[h][0] for r in g["before"]]) / np.mean([r[h][0] for r in g["base"]])
                                if g["base"] and g["before"] else math.nan)
                cells.append(f"**{ratio:.2f}x**" + (f" (prior only: {ratio_before:.2f}x)" if g["before"] else ""))
                cells.append(" / ".join(_coverage(runs, h) for _, runs in cols))
            for b in BUDGETS:
                cells.append(" / ".join(f"{100 * np.mean([r['err'][b] for r in runs]):.2f}" for _, runs in cols))
            rows.append("| " + " | ".join(cells) + " |")
    cmd = "python -m bench.sessions.checkpoint_series_bench" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    head = (["data set", "series", "method", "targets x seeds", "agreement with last previous"]
            + [c for h in HWS for c in (f"items to ±{h} (reached): {order}", f"previous / {args.baseline} at ±{h}",
                                          f"coverage at ±{h}: {order}")]
            + [f"MAE x100 n={b}: {order}" for b in BUDGETS])
    md = "\n".join([
        BEGIN,
        "### Checkpoint series: `previous` (issue 11 §5, issue 33 item 2)",
        "",
        f"Command: `EVALPLAN_DATA_DIR={data_dir()} nice -n 10 {cmd}` ({time.perf_counter() - t0:.0f} s). Series "
        "and pseudo-checkpoints as in `bench/sessions/checkpoint_series_bench.py`'s docstring: release series are real "
        "successive releases of one model line (the target is the latest); pseudo-checkpoints are real scores "
        "of a target T and a weaker model W mixed item by item along a fixed random item order (checkpoint k of 5 "
        "takes T's score on the first k/5 of the items). Same references with and without `previous`, and "
        f"`{args.baseline}` on the same targets (it has no use for `previous`); {args.seeds} session(s) (seeds) per "
        f"(target, method, prior), 95% intervals, the same stop rule (`StopRule(h)`) for every method, items "
        f"censored at the session length (max(100, {args.max_fraction:g} N)); `reached` = fraction of sessions that "
        "met the half-width within it; coverage = sessions whose interval at their stop holds the truth.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *rows,
        "",
        "<!-- interpretation -->",
        "<!-- /interpretation -->",
        END,
    ])
    print(md)
    if args.write:
        write_section(args.write, md, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
