"""Coverage and width of score-based coreset intervals on held-out models: the old rule vs the new default (issue 16 §2).

``nice -n 10 python -m bench.coresets.interval_calibration [--datasets a,b] [--methods mrmr,anchor_points,auto,irt]
[--seeds 2] [--irt-epochs 100]`` runs pieces and stores each (data set, method) in
``bench/results/interval_calibration/``; ``--render --write docs/RESULTS.md`` assembles every stored
piece into the section (``--write`` after a run does both).

Protocol: :func:`evalplan.core.backtest.backtest.split_models` (30 stratified references, every other model held
out), a 10% coreset selected on the references, the predictor fitted on them; held-out coverage and
mean width at 80/90/95% of three half-widths, all computed from the references alone:

* ``cross_fitted`` (``params.interval: "conformal"``, the default before issue 16): the
  split-conformal quantile of the references' cross-fitted errors (selector + predictor refitted
  on ten folds);
* ``loo_fixed``: the same quantile of leave-one-reference-out errors of the predictor on the chosen
  coreset (selection not refitted: no account of selection, the pre-issue-9 rule);
* ``calibrated`` (the default since issue 16, ``evalplan.core.coresets.intervals.calibrated_half_width``): scale
  ``sqrt(RMS cross-fitted * RMS loo_fixed)``, shape the conformal quantile of both sets'
  standardised errors pooled.

Methods: the score-based selectors with their service predictor (``PREDICTOR``); ``auto``
(``evalplan.core.coresets.auto.auto_select``, default selectors; cross-fitted = its outer-fold errors, loo_fixed =
its ``fixed_errors``, as the service stores them; no time cap; on alpacaeval1 without mRMR, too slow
there); ``irt`` (tinyBenchmarks' anchors, both gp-IRT and
p-IRT rows from one fit; cross-fitted = :func:`evalplan.core.irt.irt.irt_cross_fitted_errors` on 5 folds,
loo_fixed = the in-sample residuals, as the service; the old rule for IRT was conformal on the
in-sample residuals, i.e. the ``loo_fixed`` column). ``--irt-epochs`` (default 100, tinyBenchmarks'
2000 is out of reach on the shared cores) applies to every IRT fit.

Data set ``helm_lite_overall`` is the multi-benchmark case: the five HELM Lite benchmarks on their
common models, one split per seed (stratified on the mean of the five), a 10% coreset per
benchmark; the overall estimate is the mean of the five and its errors the per-reference means of
the benchmarks' errors (``evalplan.core.coresets.intervals.pooled_errors``), as the service's ``overall``. The HELM
Lite data carry no capability groups (each benchmark is its own capability, i.e. its row above).
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
from evalplan.core.backtest.backtest import _factory, _select, _selection_aware_errors, split_models
from evalplan.core.coresets.auto import DEFAULT_METHODS, auto_select
from evalplan.core.coresets.intervals import (
    calibrated_half_width,
    interval_from_errors,
    loo_conformal_interval,
    pooled_errors,
)
from evalplan.core.irt.irt import IRTSelection, irt_cross_fitted_errors, irt_predictor_for

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "bench" / "results" / "interval_calibration"
START, END = "<!-- interval-calibration -->", "<!-- /interval-calibration -->"
LEVELS = (0.8, 0.9, 0.95)
VARIANTS = ("cross_fitted", "loo_fixed", "calibrated")
DATASETS = ("openllm_v2_musr", "openllm_v2_math_hard", "helm_lite_mmlu", "helm_lite_gsm", "helm_lite_math",
            "helm_lite_med_qa", "helm_lite_commonsense", "alpacaeval1", "helm_lite_overall")
SUITE = ("helm_lite_gsm", "helm_lite_math", "helm_lite_mmlu", "helm_lite_med_qa", "helm_lite_commonsense")
METHODS = ("mrmr", "anchor_points", "random", "random_search", "lasso", "auto", "irt")
PREDICTOR = {"mrmr": "kernel_ridge", "anchor_points": "weighted_mean", "random_search": "kernel_ridge",
             "random": "kernel_ridge", "lasso": "kernel_ridge", "auto": "auto"}
#: auto without mRMR on alpacaeval1 (one mRMR selection of its continuous scores: ~60 s; auto makes 72)
NO_MRMR = ("alpacaeval1",)
PARAMS = {"anchor_points": {"n_init": 1, "swap": "never"}, "random_search": {"n_trials": 200}}
#: per (label): (signed held-out errors (T,), cross-fitted errors (M,), fixed errors (M,))
Parts = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]


def half(errors: np.ndarray, level: float) -> float:
    lo, hi = interval_from_errors(0.0, errors, level)
    return float(hi - lo) / 2


def one_benchmark(Yr: np.ndarray, Yt: np.ndarray, method: str, seed: int, irt_epochs: int,
                  no_mrmr: bool = False) -> Parts:
    """The errors of ``method``'s coreset(s) at 10% chosen on the references ``Yr``, on held-out ``Yt``."""
    sr, st = Yr.mean(axis=1), Yt.mean(axis=1)
    k = max(2, int(round(0.1 * Yr.shape[1])))
    if method == "auto":
        selectors = [m for m in DEFAULT_METHODS if m != "mrmr"] if no_mrmr else None
        res = auto_select(Yr, k, seed=seed, selectors=selectors, max_seconds=None)
        assert res.fixed_errors is not None
        idx = res.selection.idx
        return {"auto (no mRMR)" if no_mrmr else "auto": (st - np.asarray(res.model.predict(Yt[:, idx])),
                                                          res.outer_errors, res.fixed_errors)}
    if method == "irt":
        sel = IRTSelection(k=k, seed=seed, epochs=irt_epochs).fit(Yr)
        pred = irt_predictor_for(Yr, sel.ranking_, weights=sel.weights_, selector=sel, seed=seed)
        est_t, est_r = pred.predict(Yt[:, sel.ranking_]), pred.predict(Yr[:, sel.ranking_])
        out: Parts = {}
        for v in ("gp_irt", "p_irt"):
            cf = irt_cross_fitted_errors(Yr, v, sel.dim_, sel.bias_, k, seed=seed, epochs=irt_epochs)
            out[f"irt+{v}"] = (st - getattr(est_t, v), cf, sr - getattr(est_r, v))
        return out
    pred, params = PREDICTOR[method], PARAMS.get(method, {})
    idx, w, _ = _select(method, Yr, k, seed, params)
    if pred == "weighted_mean" and w is None:
        w = np.full(k, 1.0 / k)
    fac = _factory(pred, w)
    err_t = st - fac().fit(Yr[:, idx], sr).predict(Yt[:, idx])
    cf = _selection_aware_errors(method, pred, Yr, sr, k, seed, params, {})
    loo = loo_conformal_interval(fac, Yr[:, idx], sr, Yt[:1, idx], level=0.9).loo_errors
    assert loo is not None
    return {f"{method}+{pred}": (err_t, cf, loo)}


def cells(parts: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[str, dict[str, list[float]]]:
    """{variant: {level: [coverage, width]}} of one seed's errors."""
    err_t, cf, loo = (np.asarray(p, dtype=float) for p in parts)
    out: dict[str, dict[str, list[float]]] = {v: {} for v in VARIANTS}
    for level in LEVELS:
        hs = (half(cf, level), half(loo, level), calibrated_half_width(cf, loo, level))
        for v, h in zip(VARIANTS, hs):
            out[v][str(level)] = [float(np.mean(np.abs(err_t) <= h)), 2 * h]
    return out


def run(name: str, method: str, seeds: int, irt_epochs: int) -> dict[str, list[dict[str, Any]]]:
    """{row label: one cells() per seed}."""
    rows: dict[str, list[dict[str, Any]]] = {}
    if name == "helm_lite_overall":
        from bench.coresets.multi_benchmark_accuracy import load_suite

        _, mats = load_suite(SUITE)
        s = np.mean([m.mean(axis=1) for m in mats], axis=0)
        for seed in range(seeds):
            ref, test = split_models(s, 30, "stratified", np.random.default_rng(seed))
            per = [one_benchmark(m[ref], m[test], method, seed, irt_epochs) for m in mats]
            for label in per[0]:
                et, cf, fx = (pooled_errors(np.vstack([p[label][i] for p in per])) for i in range(3))
                rows.setdefault(f"{label} (overall of 5)", []).append(cells((et, cf, fx)))
        return rows
    Y = load(name)
    s = Y.mean(axis=1)
    for seed in range(seeds):
        ref, test = split_models(s, 30, "stratified", np.random.default_rng(seed))
        for label, parts in one_benchmark(Y[ref], Y[test], method, seed, irt_epochs, name in NO_MRMR).items():
            rows.setdefault(label, []).append(cells(parts))
    return rows


def piece_path(name: str, method: str) -> Path:
    return CACHE / f"{name}__{method}.json"


def render() -> str:
    head = ("| data set | method | seeds | " + " | ".join(f"{v} {int(l * 100)}%" for l in LEVELS for v in VARIANTS)
            + " |")
    lines = [head, "|" + "---|" * (3 + len(LEVELS) * len(VARIANTS))]
    pieces = []
    hits = {v: 0 for v in VARIANTS}
    narrower = 0
    n_cells = 0
    groups: dict[str, list[int]] = {}  # group -> [cells, calibrated within target, old rule within target]
    for name in DATASETS:
        for method in METHODS:
            p = piece_path(name, method)
            if not p.exists():
                continue
            piece = json.loads(p.read_text())
            pieces.append(piece)
            for label, per_seed in piece["rows"].items():
                row = []
                for level in LEVELS:
                    n_cells += 1
                    means = {}
                    for v in VARIANTS:
                        a = np.array([c[v][str(level)] for c in per_seed])
                        means[v] = (a[:, 0].mean(), a[:, 1].mean())
                        hits[v] += int(abs(round(means[v][0], 2) - level) <= 0.03 + 1e-9)
                        row.append(f"{a[:, 0].mean():.2f} / {a[:, 1].mean() * 100:.1f}")
                    narrower += int(means["calibrated"][1] < means["cross_fitted"][1])
                    group = ("overall" if name == "helm_lite_overall" else "auto" if label.startswith("auto")
                             else "IRT" if label.startswith("irt") else "single methods")
                    old_rule = "loo_fixed" if label.startswith("irt") else "cross_fitted"  # IRT: in-sample residuals
                    g = groups.setdefault(group, [0, 0, 0])
                    g[0] += 1
                    g[1] += int(abs(round(means["calibrated"][0], 2) - level) <= 0.03 + 1e-9)
                    g[2] += int(abs(round(means[old_rule][0], 2) - level) <= 0.03 + 1e-9)
                lines.append(f"| {name} | {label} | {len(per_seed)} | " + " | ".join(row) + " |")
    runs = "; ".join(f"{p['dataset']}/{p['method']}: {p['seconds'] / 60:.1f} min, {p['ran']}"
                     + (f", IRT {p['irt_epochs']} epochs" if p["method"] == "irt" else "") for p in pieces)
    return "\n".join([
        START, "## Score-based intervals: held-out coverage / width by calibration (issue 16 §2)", "",
        "`nice -n 10 python -m bench.coresets.interval_calibration --datasets D --methods M --seeds S` per piece (stored in "
        "`bench/results/interval_calibration/`), then `python -m bench.coresets.interval_calibration --render --write "
        "docs/RESULTS.md`. 30 stratified references, every other model held out, 10% coresets; each cell is "
        "held-out coverage / mean width (points), mean over the row's seeds. `cross_fitted` is the rule before "
        "issue 16 (`params.interval: \"conformal\"`); `loo_fixed` ignores the selection (for the IRT rows it is "
        "the old IRT rule, conformal on the in-sample residuals); `calibrated` is the default since issue 16 "
        "(docs/DECISIONS.md \"Score-based intervals\"). `auto`: cross-fitted = its outer-fold errors. "
        "`helm_lite_overall`: the mean of the five HELM Lite benchmarks, pooled errors (the service's `overall`). "
        "Target: coverage within ±0.03 of nominal at the smallest width.", "",
        *lines, "", "Cells (row x level) with coverage within ±0.03 of nominal: "
        + ", ".join(f"`{v}` {hits[v]} of {n_cells}" for v in VARIANTS)
        + f"; `calibrated` narrower than `cross_fitted` in {narrower} of {n_cells}. By group, `calibrated` vs the "
        "rule before issue 16 (IRT rows: `loo_fixed`, the others: `cross_fitted`): "
        + "; ".join(f"{k} {g[1]} vs {g[2]} of {g[0]}" for k, g in groups.items()) + ".", "",
        f"Pieces (wall time on 2 shared cores, when): {runs}.", "", INTERPRETATION[0], INTERPRETATION[1],
        END])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(DATASETS[:4]))
    ap.add_argument("--methods", default="mrmr,anchor_points,random")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--irt-epochs", type=int, default=100)
    ap.add_argument("--render", action="store_true", help="only assemble the stored pieces")
    ap.add_argument("--write", default=None)
    args = ap.parse_args()
    if not args.render:
        CACHE.mkdir(parents=True, exist_ok=True)
        for name in args.datasets.split(","):
            for method in args.methods.split(","):
                if method not in METHODS:
                    raise SystemExit(f"unknown method {method!r}; choose among {METHODS}")
                t0 = time.perf_counter()
                rows = run(name, method, args.seeds, args.irt_epochs)
                piece = {"dataset": name, "method": method, "seeds": args.seeds, "irt_epochs": args.irt_epochs,
                         "seconds": time.perf_counter() - t0, "ran": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                         "rows": rows}
                piece_path(name, method).write_text(json.dumps(piece))
                print(name, method, f"{piece['seconds']:.0f} s", flush=True)
    section = render()
    print(section)
    if args.write:
        write_section(ROOT / args.write, section, START, END)


if __name__ == "__main__":
    main()
