"""Issue 33 item 1: which precision stop is valid *at the stop* and cheaper than the betting sequence.

Protocol (same draws, same targets, every rule): per (data set, regime) piece, held-out targets
(interpolation: random models; extrapolation: the best models, the next 20% by rank discarded) and ALL the
remaining models as references (no cap). For each target and seed one ``active_design`` session (the
default's draw, working model and terms) is recorded once, up to the first n where every candidate rule
below has reached ±0.02 (or every item is observed): per n its term ``theta_n``, the logical bounds and the
betting confidence sequence. Every candidate stop rule is then evaluated offline on the same trajectory:
the first n >= 10 where the rule's 95% half-width (intersected with the logical bounds) is <= h, the
interval it reports there, covered or not. ``random`` is replayed on a uniform order of the same target's
items (seeded): its own fixed-n interval as the stop (hypergeometric for binary scores; normal with the
finite-population correction otherwise, with and without the variance floor).

Candidates on the terms (equal weights; ``s2`` the terms' sample variance, ``R`` the score range's width):

* ``naive``: ``z sqrt(s2 / n)`` (the martingale-CLT fixed-n interval; the issue's under-covering stop);
* ``floor``: ``z sqrt((s2 + R^2 / n) / n)`` (Chow & Robbins 1965: the variance estimate plus ``n^-1``,
  in score units);
* ``chi2``: ``s2`` replaced by its one-sided 95% chi-square upper bound ``(n - 1) s2 / chi2_0.05(n - 1)``;
* ``floor+chi2``: both;
* ``asympcs``: the asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (2021,
  Thm 2.2, two-sided, ``rho`` tuned for ``t* = 100``), with ``s2`` floored as in ``floor``;
* ``rule|cs<=kh``: ``rule``'s half-width, at least the betting CS's half-width / k: a stop at h also needs
  the CS within ``k h`` (the CS as an outer guard against a lucky variance);
* ``wnaive`` / ``wfloor`` / ``w1floor``: the terms weighted by ``(N / |R_t|)^p`` (p = 2, 2, 1; predictable,
  a term's spread shrinks with the remainder ``R_t`` it was drawn from), the weighted mean's CLT variance,
  ``wfloor`` / ``w1floor`` plus the floor ``R^2 / n`` per term; ``wbd``: that floor scaled by the Bernoulli
  bound ``4 m (1 - m)`` at the smoothed mean;
* the default (``active_design``'s ``interval_kind: "sequential"``) is ``wfloor|cs<=2h``;
* ``anytime``: the betting confidence sequence itself (today's default), when reached.

Each piece (every rule's stops, not the trajectories) is stored as JSON under ``bench/results/stop_rule/``; ``--write docs/RESULTS.md`` renders all.

    EVALPLAN_DATA_DIR=/work/shared/data nice -n 10 python -m bench.sessions.stop_rule_bench --targets 12 \\
        --workers 2 --write docs/RESULTS.md

Working models (issue 33 item 4): ``--working-model NAME`` runs the same protocol with ``active_design``'s
``working_model`` set to NAME (``reference_gp_evidence_mix``, the default; ``factor``; ``prequential``), stored
under ``bench/results/working_model/NAME/``; ``--compare-working-models --write docs/RESULTS.md`` renders the
stored ones side by side (the default's rule, items / random's, coverage at the stop, the oracle ceiling) into
the ``working-model`` section:

    EVALPLAN_DATA_DIR=/work/shared/data nice -n 10 python -m bench.sessions.stop_rule_bench --targets 8 \\
        --datasets helm_lite_commonsense --working-model factor
    python -m bench.sessions.stop_rule_bench --compare-working-models --write docs/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import chi2, hypergeom

from bench.common.markdown_sections import write_section
from bench.common.pieces import piece_path
from bench.sessions.active_design_bench import DATASETS, REGIMES, oracle_ess, split
from bench.sessions.sequential_accuracy_bench import data_dir, load
from evalplan.core.sequential import BucketPrior, SessionConfig
from evalplan.core.sequential.active_design import ActiveDesignEstimator
from evalplan.core.sequential.stopping import StopRule

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "bench" / "results" / "stop_rule"
BEGIN, END = "<!-- stop-rule -->", "<!-- /stop-rule -->"
WM_STORE = ROOT / "bench" / "results" / "working_model"
WM_BEGIN, WM_END = "<!-- working-model -->", "<!-- /working-model -->"
WORKING_MODELS = ("reference_gp_evidence_mix", "factor", "prequential")
DEFAULT_WM = "reference_gp_evidence_mix"
HALF_WIDTHS = (0.03, 0.02)
Z = 1.959963984540054
ALPHA = 0.05
MIN_ITEMS = 10
FRACTIONS = (0.05, 0.1, 0.25)
CANDIDATES = ("naive", "floor", "chi2", "floor+chi2", "asympcs", "naive|cs<=2h", "floor|cs<=2h", "floor|cs<=1.5h",
              "wnaive", "wfloor", "wfloor|cs<=2h", "w1floor", "w1floor|cs<=2h", "wbd|cs<=2h", "anytime")
ASYMP_T = 100.0
RECORD_UNTIL = ("naive", "floor", "chi2", "floor+chi2")  # recorded until these all reach ±min(HALF_WIDTHS)


def half_width(rule: str, n: int, s2: float, span: float) -> float:
    """A candidate's 95% half-width from ``n`` terms whose sample variance is ``s2``."""
    if n < 2:
        return math.inf
    rule = rule.split("|")[0]
    if rule == "naive":
        v = s2
    elif rule == "floor":
        v = s2 + span * span / n
    elif rule == "chi2":
        v = (n - 1) * s2 / chi2.ppf(ALPHA, n - 1)
    elif rule == "floor+chi2":
        v = (n - 1) * s2 / chi2.ppf(ALPHA, n - 1) + span * span / n
    elif rule == "asympcs":
        v = s2 + span * span / n
        rho2 = (-2 * math.log(ALPHA) + math.log(-2 * math.log(ALPHA) + 1)) / ASYMP_T / max(v, 1e-12)
        a = n * v * rho2 + 1.0
        return math.sqrt(2.0 * a / (n * n * rho2) * math.log(math.sqrt(a) / ALPHA))
    else:
        raise ValueError(rule)
    return Z * math.sqrt(max(v, 0.0) / n)


# --------------------------------------------------------------------------- recording
def record(prior: BucketPrior, y: np.ndarray, seed: int, working_model: str = DEFAULT_WM) -> dict[str, Any]:
    """One default session's trajectory, until every candidate (but the CS) is within ±min(HALF_WIDTHS)."""
    config = SessionConfig(method="active_design", seed=seed, stop=StopRule(0.0).as_dict())
    est = ActiveDesignEstimator(prior, config, score_range=(0.0, 1.0), working_model=working_model)
    answered: list[str] = []
    N = y.size
    theta: list[float] = []
    lo_l: list[float] = []
    hi_l: list[float] = []
    cs: list[tuple[float, float]] = []
    h_min = min(HALF_WIDTHS)
    s = ss = 0.0
    while est.n_observed < N:
        item = est.propose()[0]
        answered.append(est.answering())  # the model whose predictions drew this item
        est.observe(item, float(y[item]))
        th = est.cs._terms[-1][0]
        theta.append(th)
        s += th
        ss += th * th
        a, b = est._logical()
        lo_l.append(a)
        hi_l.append(b)
        cs.append((est.cs.low, est.cs.high))
        n = len(theta)
        if n >= MIN_ITEMS:
            m = s / n
            s2 = max(ss - n * m * m, 0.0) / (n - 1)
            done = True
            for rule in RECORD_UNTIL:
                hw = half_width(rule, n, s2, 1.0)
                if min(hi_l[-1], m + hw) - max(lo_l[-1], m - hw) > 2 * h_min:
                    done = False
                    break
            if done:
                break
    state = est.design_state()
    return {"theta": theta, "lo": lo_l, "hi": hi_l, "cs": cs, "exhausted": len(theta) >= N,
            "factor_share": float(np.mean([a == "factor" for a in answered])) if answered else 0.0,
            "prequential_brier": state.get("prequential_brier"), "factor": state.get("factor")}


def random_orders(y: np.ndarray, seed: int) -> dict[str, Any]:
    """Uniform random sampling of the same target: items and coverage at each stop, with the random
    method's own interval (hypergeometric for binary scores, normal FPC otherwise, with or without the floor)."""
    N = y.size
    order = np.random.default_rng([seed, 33]).permutation(N)
    x = y[order]
    binary = bool(np.all((y == 0.0) | (y == 1.0)))
    mu = float(y.mean())
    out: dict[str, Any] = {}
    cum = np.cumsum(x)
    cum2 = np.cumsum(x * x)
    for floor in (False, True):
        if binary and floor:  # the exact interval has no floor to add
            out["floor"] = out["plain"]
            continue
        found: dict[str, Any] = {}
        for n in range(MIN_ITEMS, N + 1):
            mean = cum[n - 1] / n
            if binary:
                k = int(round(cum[n - 1]))
                K = np.arange(N + 1)
                ok = np.flatnonzero((hypergeom.sf(k - 1, N, K, n) > ALPHA / 2) & (hypergeom.cdf(k, N, K, n) > ALPHA / 2))
                lo, hi = (ok[0] / N, ok[-1] / N) if ok.size else (mean, mean)
            else:
                s2 = max(cum2[n - 1] - n * mean * mean, 0.0) / (n - 1)
                if floor:
                    s2 += 1.0 / n
                half = Z * math.sqrt((1 - n / N) * s2 / n)
                lo, hi = max(mean - half, 0.0), min(mean + half, 1.0)
            for h in HALF_WIDTHS:
                if str(h) not in found and (hi - lo) / 2 <= h:
                    found[str(h)] = {"n": n, "covered": bool(lo - 1e-12 <= mu <= hi + 1e-12)}
            if len(found) == len(HALF_WIDTHS):
                break
        for h in HALF_WIDTHS:
            found.setdefault(str(h), {"n": N, "covered": True})
        out["floor" if floor else "plain"] = found
    return out


def evaluate(tr: dict[str, Any], mu: float, N: int) -> dict[str, Any]:
    """Every candidate's stop (n, covered) at each half-width, and its coverage at the fixed fractions."""
    th = np.asarray(tr["theta"])
    n_all = th.size
    out: dict[str, Any] = {"stop": {}, "fixed": {}}
    cum, cum2 = np.cumsum(th), np.cumsum(th * th)
    # remainder weights (N / |R_t|)^2: predictable; the t-th term's spread scales with |R_t| / N
    w = (N / (N - np.arange(n_all, dtype=float))) ** 2
    sums = {}
    for key, ww in (("w", w), ("w1", np.sqrt(w))):
        sums[key] = (np.cumsum(ww), np.cumsum(ww * ww), np.cumsum(ww * th), np.cumsum(ww * ww * th),
                     np.cumsum(ww * ww * th * th))
    for rule in CANDIDATES:
        cw, cw2, cwt, cw2t, cw2t2 = sums["w1" if rule.startswith("w1") else "w"]
        stops: dict[str, Any] = {}
        fixed: dict[str, Any] = {}
        marks = {max(MIN_ITEMS, math.ceil(f * N)): str(f) for f in FRACTIONS}
        for n in range(2, n_all + 1):
            m = cum[n - 1] / n
            s2 = max(cum2[n - 1] - n * m * m, 0.0) / (n - 1)
            L, U = tr["lo"][n - 1], tr["hi"][n - 1]
            if rule == "anytime":
                lo, hi = max(L, tr["cs"][n - 1][0]), min(U, tr["cs"][n - 1][1])
            else:
                if rule.startswith("w"):  # the remainder-weighted mean and its CLT variance (+ the floor per term)
                    m = cwt[n - 1] / cw[n - 1]
                    num = cw2t2[n - 1] - 2 * m * cw2t[n - 1] + m * m * cw2[n - 1]
                    v = num / cw[n - 1] ** 2 * n / (n - 1)
                    if "floor" in rule:
                        v += cw2[n - 1] / cw[n - 1] ** 2 / n
                    elif rule.startswith("wbd"):  # the floor scaled by the Bernoulli bound at the (smoothed) mean
                        mt = (n * min(max(m, 0.0), 1.0) + 1.0) / (n + 2.0)
                        v += 4.0 * mt * (1.0 - mt) * cw2[n - 1] / cw[n - 1] ** 2 / n
                    hw = Z * math.sqrt(max(v, 0.0))
                else:
                    hw = half_width(rule, n, s2, 1.0)
                if "|cs<=" in rule:  # the guard as the product applies it: at least the CS's half-width / k
                    cs_hw = (min(U, tr["cs"][n - 1][1]) - max(L, tr["cs"][n - 1][0])) / 2
                    hw = max(hw, cs_hw / float(rule.split("<=")[1].rstrip("h")))
                lo, hi = max(L, m - hw), min(U, m + hw)
            if n in marks:
                fixed[marks[n]] = bool(lo - 1e-12 <= mu <= hi + 1e-12)
            if n < MIN_ITEMS:
                continue
            for h in HALF_WIDTHS:
                if str(h) in stops:
                    continue
                if (hi - lo) / 2 <= h + 1e-12:
                    stops[str(h)] = {"n": n, "covered": bool(lo - 1e-12 <= mu <= hi + 1e-12)}
        for h in HALF_WIDTHS:
            if str(h) not in stops and tr["exhausted"]:
                stops[str(h)] = {"n": N, "covered": True}
        out["stop"][rule] = stops
        out["fixed"][rule] = fixed
    return out


def run_piece(name: str, regime: str, n_targets: int, seeds: int, split_seed: int,
              working_model: str = DEFAULT_WM) -> dict[str, Any]:
    _, X = load(name)
    X = X[:, ~np.isnan(X).any(axis=0)]
    targets, refs = split(X, regime, n_targets, 10 ** 9, split_seed)
    N = X.shape[1]
    prior = BucketPrior.from_reference_scores(X[refs])
    t0 = time.perf_counter()
    rows = []
    for k, t in enumerate(targets):
        y = X[t]
        mu, S2 = float(y.mean()), float(y.var(ddof=1))
        runs = []
        for seed in range(seeds):
            t1 = time.perf_counter()
            tr = record(prior, y, seed, working_model)
            runs.append({"seed": seed, "n_recorded": len(tr["theta"]), **evaluate(tr, mu, N),
                         "seconds": time.perf_counter() - t1, "factor_share": tr["factor_share"],
                         "prequential_brier": tr["prequential_brier"], "factor": tr["factor"],
                         "random": random_orders(y, 1000 * seed + k)})  # the trajectory itself is not stored
        rows.append({"model": int(t), "mean": mu, "S2": S2, "runs": runs, "oracle": oracle_ess(prior, y, 0.25)})
        print(f"  {name} {regime} target {k + 1}/{len(targets)} n={runs[0]['n_recorded']} "
              f"{time.perf_counter() - t0:.0f}s", flush=True)
    return {"dataset": name, "regime": regime, "working_model": working_model, "n_items": N, "n_models": int(X.shape[0]),
            "n_targets": int(len(targets)), "n_references": int(len(refs)), "seeds": seeds, "targets": rows,
            "binary": bool(np.all((X == 0) | (X == 1))),
            "seconds": time.perf_counter() - t0, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores (shared), Python {platform.python_version()}"}


def _job(args: tuple[str, str, int, int, int, str]) -> str:
    name, regime, n_targets, seeds, split_seed, working_model = args
    piece = run_piece(name, regime, n_targets, seeds, split_seed, working_model)
    path = piece_path(store_of(working_model), name, regime)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(piece))
    return f"{name} {regime}: {piece['seconds']:.0f}s"


def store_of(working_model: str | None) -> Path:
    """Where a run's pieces go: ``stop_rule/`` for the stop-rule table, ``working_model/NAME/`` with
    ``--working-model NAME``."""
    return STORE if working_model is None else WM_STORE / working_model


# --------------------------------------------------------------------------- summary and rendering
def fixed_n_items(S2: float, N: int, h: float) -> int:
    if S2 <= 0:
        return 1
    return int(min(N, math.ceil(Z * Z * S2 / (h * h + Z * Z * S2 / N))))


def summarize(p: dict[str, Any]) -> dict[str, Any]:
    N = p["n_items"]
    s: dict[str, Any] = {}
    for t in p["targets"]:
        for r in t["runs"]:
            if "stop" not in r:
                r.update(evaluate(r["trajectory"], t["mean"], N))
    for h in map(str, HALF_WIDTHS):
        rnd = [r["random"]["floor"][h]["n"] for t in p["targets"] for r in t["runs"]]
        rnd_cov = [r["random"]["floor"][h]["covered"] for t in p["targets"] for r in t["runs"]]
        cell: dict[str, Any] = {"random": float(np.mean(rnd)), "random_cov": float(np.mean(rnd_cov))}
        for rule in CANDIDATES:
            got = [(r["stop"][rule].get(h), rr) for t in p["targets"] for r, rr in
                   zip(t["runs"], [r["random"]["floor"][h]["n"] for r in t["runs"]])]
            reached = [g for g, _ in got if g is not None]
            if len(reached) < len(got):
                cell[rule] = {"reached": len(reached) / len(got), "items": None, "cov": None, "ratio": None}
                continue
            items = [g["n"] for g, _ in got]
            cell[rule] = {"reached": 1.0, "items": float(np.mean(items)),
                          "cov": float(np.mean([g["covered"] for g, _ in got])),
                          "ratio": float(np.mean(items) / np.mean(rnd))}
        orc = [fixed_n_items(t["S2"] / max(t["oracle"]["fit"], 1e-9), N, float(h)) for t in p["targets"]]
        cell["oracle"] = float(np.mean(orc))
        s[h] = cell
    fixed: dict[str, Any] = {}
    for rule in CANDIDATES:
        for f in map(str, FRACTIONS):
            hits = [r["fixed"][rule][f] for t in p["targets"] for r in t["runs"] if f in r["fixed"][rule]]
            fixed[f"{rule}@{f}"] = (float(np.mean(hits)), len(hits)) if hits else (None, 0)
    s["fixed"] = fixed
    return s


def _c(v: Any) -> str:
    return "n/a" if v is None else f"{v:.0%}"


def render(pieces: list[dict[str, Any]], cmd: str, chosen: str) -> str:
    lines = [BEGIN, f"<!-- written by `{cmd}` -->",
             "### Precision stops valid at the stop: every candidate on the same `active_design` draws (issue 33)", "",
             "Protocol: `bench/sessions/stop_rule_bench.py`'s docstring (same draws, targets and stop for every rule; "
             "all references; `random` on a uniform order of the same targets with its own interval, the variance "
             "floor on non-binary scores). Items = mean over targets x seeds of the first n >= 10 with the 95% "
             "half-width <= h; cov = share of those stopped intervals that cover the target's true mean; ratio = "
             "items / `random`'s. `oracle` = the items this design would need with a working model fitted to the "
             "target's own scores (its one-draw ESS, a ceiling).", ""]
    for h in map(str, HALF_WIDTHS):
        lines += [f"#### ±{h} stop", "",
                  "| data set | regime | N | targets x seeds | refs | random: items (cov) | oracle items | "
                  + " | ".join(f"`{r}`: items (cov) ratio" for r in CANDIDATES) + " |",
                  "|" + "---|" * (7 + len(CANDIDATES))]
        for p in pieces:
            s = summarize(p)[h]
            cells = []
            for r in CANDIDATES:
                c = s[r]
                if c["items"] is None:  # recorded until the other rules stopped: this one needs more items
                    cells.append(f"later than recorded ({c['reached']:.0%} reached)")
                else:
                    cells.append(f"{c['items']:.0f} ({c['cov']:.0%}) {c['ratio']:.2f}x")
            lines.append(f"| {p['dataset']} | {p['regime']} | {p['n_items']} | {p['n_targets']} x {p['seeds']} | "
                         f"{p['n_references']} | {s['random']:.0f} ({s['random_cov']:.0%}) | {s['oracle']:.0f} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    # goals for the chosen rule
    lines += [f"#### Goals for the default's rule (`{chosen}`)", "",
              "| data set | regime | cov ±0.03 | cov ±0.02 | fixed-n cov 5% / 10% / 25% | items/random ±0.03 | "
              "items/random ±0.02 |", "|---|---|---|---|---|---|---|"]
    ratios: list[float] = []
    covs: list[float] = []
    fixed_all: list[float] = []
    for p in pieces:
        s = summarize(p)
        c3, c2 = s["0.03"][chosen], s["0.02"][chosen]
        fx = [s["fixed"][f"{chosen}@{f}"] for f in map(str, FRACTIONS)]
        fixed_all += [v for v, _ in fx if v is not None]
        for c in (c3, c2):
            if c["ratio"] is not None:
                ratios.append(c["ratio"])
                covs.append(c["cov"])
        lines.append(f"| {p['dataset']} | {p['regime']} | {_c(c3['cov'])} | {_c(c2['cov'])} | "
                     + " / ".join(f"{_c(v)} ({k})" for v, k in fx) + f" | {c3['ratio'] or float('nan'):.2f}x | "
                     f"{c2['ratio'] or float('nan'):.2f}x |")
    if ratios:
        lines += ["", f"Over {len(pieces)} pieces x 2 stops: coverage at the stop {min(covs):.0%}-{max(covs):.0%} "
                  f"(goal >= 93% in every cell); items / random's median {np.median(ratios):.2f}x (goal <= 0.7x), "
                  f"largest {max(ratios):.2f}x (goal <= 1.0x); fixed-n coverage "
                  f"{min(fixed_all):.0%}-{max(fixed_all):.0%} (goal 93-97%)."]
    lines += ["", promise_table(pieces, chosen), "", "<!-- interpretation -->", "<!-- /interpretation -->", END]
    return "\n".join(lines)


def promise_table(pieces: list[dict[str, Any]], chosen: str) -> str:
    """Per data set: the items the default needs for ±3 and ±2 points at 95% on held-out models (README)."""
    rows = ["#### Items the default session needs at 95% on held-out models (mean over targets; % of N)", "",
            "| data set | N | ±3 points: random targets | ±3: best models | ±2: random targets | ±2: best models |",
            "|---|---|---|---|---|---|"]
    for name in dict.fromkeys(p["dataset"] for p in pieces):
        got = {p["regime"]: (p, summarize(p)) for p in pieces if p["dataset"] == name}
        N = next(iter(got.values()))[0]["n_items"]
        cells = []
        for h in map(str, HALF_WIDTHS):
            for regime in ("interpolation", "extrapolation"):
                if regime not in got or got[regime][1][h][chosen]["items"] is None:
                    cells.append("n/a")
                    continue
                c = got[regime][1][h][chosen]
                cells.append(f"{c['items']:.0f} ({c['items'] / N:.0%}; random {got[regime][1][h]['random']:.0f})")
        rows.append(f"| {name} | {N} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _wm_pieces(datasets: list[str], regimes: list[str]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """(data set, regime) -> working model -> stored piece, for the pieces every working model has."""
    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for d in datasets:
        for r in regimes:
            got = {wm: json.loads(path.read_text()) for wm in WORKING_MODELS
                   if (path := piece_path(store_of(wm), d, r)).exists()}
            if len(got) == len(WORKING_MODELS):
                out[(d, r)] = got
    return out


def render_working_models(datasets: list[str], regimes: list[str], chosen: str) -> str:
    """The working models side by side on the same targets and seeds: the default rule's items to each stop
    (and / random's on the same targets), coverage at the stop, and the oracle ceiling (issue 33 item 4)."""
    pieces = _wm_pieces(datasets, regimes)
    cmd = "python -m bench.sessions.stop_rule_bench --compare-working-models --write docs/RESULTS.md"
    runs = sorted({(p["n_targets"], p["seeds"]) for got in pieces.values() for p in got.values()})
    lines = [WM_BEGIN, f"<!-- written by `{cmd}` -->",
             "### Working models: the reference GP, the factor model and the prequential choice (issue 33 item 4)", "",
             "Protocol: `bench/sessions/stop_rule_bench.py` (its docstring) run once per working model with "
             "`--working-model NAME` (pieces under `bench/results/working_model/NAME/`; targets x seeds per piece: "
             + ", ".join(f"{t} x {s}" for t, s in runs) + "), every working model on the same held-out targets, "
             f"seeds and all references; the default's stop rule (`{chosen}`, `interval_kind: sequential`). Items = "
             "mean over targets x seeds of the first n >= 10 with the 95% half-width <= h; ratio = items / `random`'s "
             "on the same targets (uniform order, its own interval); cov = share of stopped intervals covering the "
             "target's mean. `oracle` = the items this design would need with a working model fitted to the target's "
             "own scores (one-draw ESS; the ceiling). `factor` = the logistic factor model "
             "(`src/evalplan/core/sequential/factor_model.py`); `prequential` = before each draw, whichever of the "
             "two had the smaller summed squared error on the items observed so far (each predicted before it was "
             "observed); `factor share` = the share of its draws the factor model made.", ""]
    summary: dict[str, list[tuple[float, float, str]]] = {wm: [] for wm in WORKING_MODELS}
    covered: dict[str, list[bool]] = {wm: [] for wm in WORKING_MODELS}
    oracle_ratios: list[float] = []
    oracle_by: dict[str, list[float]] = {reg: [] for reg in REGIMES}
    for h in map(str, HALF_WIDTHS):
        lines += [f"#### ±{h} stop", "",
                  "| data set | regime | N | refs | random items | oracle items (ratio) | "
                  + " | ".join(f"`{wm}`: items (cov) ratio" for wm in WORKING_MODELS)
                  + " | prequential: factor share | seconds per session (default / factor / prequential) |",
                  "|" + "---|" * (8 + len(WORKING_MODELS))]
        for (d, r), got in pieces.items():
            base = got[DEFAULT_WM]
            s0 = summarize(base)[h]
            cells = []
            for wm in WORKING_MODELS:
                p = got[wm]
                c = summarize(p)[h][chosen]
                if c["items"] is None:
                    cells.append(f"later than recorded ({c['reached']:.0%} reached)")
                    continue
                cells.append(f"{c['items']:.0f} ({c['cov']:.0%}) {c['ratio']:.2f}x")
                summary[wm].append((c["ratio"], c["cov"], f"{d} {r} ±{h}"))
                covered[wm] += [run["stop"][chosen][h]["covered"] for t in p["targets"] for run in t["runs"]
                                if h in run["stop"][chosen]]
            oracle_ratios.append(s0["oracle"] / s0["random"])
            oracle_by[r].append(s0["oracle"] / s0["random"])
            share = np.mean([run.get("factor_share", 0.0) for t in got["prequential"]["targets"]
                             for run in t["runs"]])
            secs = " / ".join(f"{np.mean([run.get('seconds', math.nan) for t in got[wm]['targets'] for run in t['runs']]):.0f}"
                              for wm in WORKING_MODELS)
            lines.append(f"| {d} | {r} | {base['n_items']} | {base['n_references']} | {s0['random']:.0f} | "
                         f"{s0['oracle']:.0f} ({s0['oracle'] / s0['random']:.2f}x) | " + " | ".join(cells)
                         + f" | {share:.0%} | {secs} |")
        lines.append("")
    lines += ["#### Pooled over the pieces above x both stops", "",
              "| working model | median items / random | interpolation | extrapolation | largest | cells with fewer "
              "items than the default | pooled coverage at the stop | lowest cell |",
              "|---|---|---|---|---|---|---|---|"]
    base_cells = {cell: x for x, _, cell in summary[DEFAULT_WM]}
    for wm in WORKING_MODELS:
        if not summary[wm]:
            continue
        ratios = [x for x, _, _ in summary[wm]]
        by = {reg: [x for x, _, cell in summary[wm] if f" {reg} " in cell] for reg in REGIMES}
        fewer = [x < base_cells[cell] for x, _, cell in summary[wm] if cell in base_cells]
        low = min(summary[wm], key=lambda z: z[1])
        lines.append(f"| `{wm}` | {np.median(ratios):.2f}x | "
                     + " | ".join(f"{np.median(v):.2f}x" if v else "n/a" for v in by.values())
                     + f" | {max(ratios):.2f}x | {'-' if wm == DEFAULT_WM else f'{sum(fewer)} of {len(fewer)}'} | "
                     f"{np.mean(covered[wm]):.1%} ({len(covered[wm])} stops) | {low[1]:.0%} ({low[2]}) |")
    if oracle_ratios:
        lines.append(f"| oracle (ceiling) | {np.median(oracle_ratios):.2f}x | "
                     + " | ".join(f"{np.median(v):.2f}x" for v in oracle_by.values() if v)
                     + f" | {max(oracle_ratios):.2f}x | - | - | - |")
    lines += ["", "<!-- interpretation -->", "<!-- /interpretation -->", WM_END]
    return "\n".join(lines)


def write_after(path: Path, section: str, begin: str, end: str, anchor: str) -> None:
    """``write_section``, the section placed right after the marker ``anchor`` when it is not there yet."""
    text = path.read_text() if path.exists() else ""
    if begin not in text and anchor in text:
        i = text.index(anchor) + len(anchor)
        path.write_text(text[:i] + "\n\n" + begin + "\n" + end + text[i:])
    write_section(path, section, begin, end)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--regimes", nargs="+", default=list(REGIMES))
    ap.add_argument("--targets", type=int, default=12)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--render", action="store_true", help="only render the stored pieces")
    ap.add_argument("--chosen", default="wfloor|cs<=2h", help="the default's rule (active_design, sequential)")
    ap.add_argument("--write", type=Path)
    ap.add_argument("--working-model", choices=WORKING_MODELS, default=None,
                    help="active_design's working_model (pieces under bench/results/working_model/NAME/)")
    ap.add_argument("--compare-working-models", action="store_true",
                    help="only render the stored working-model pieces side by side (the working-model section)")
    args = ap.parse_args(argv)
    if args.compare_working_models:
        md = render_working_models(args.datasets, args.regimes, args.chosen)
        print(md)
        if args.write:
            write_after(args.write, md, WM_BEGIN, WM_END, END)
        return 0
    if not args.render:
        jobs = [(d, r, args.targets, args.seeds, args.split_seed, args.working_model or DEFAULT_WM)
                for d in args.datasets for r in args.regimes]
        if args.workers > 1:
            with ProcessPoolExecutor(args.workers) as pool:
                for msg in pool.map(_job, jobs):
                    print(msg, flush=True)
        else:
            for j in jobs:
                print(_job(j), flush=True)
    if args.working_model is not None:
        return 0  # rendered with --compare-working-models
    pieces = [json.loads(path.read_text()) for d in args.datasets for r in args.regimes
              if (path := piece_path(STORE, d, r)).exists()]
    cmd = (f"EVALPLAN_DATA_DIR={data_dir()} python -m bench.sessions.stop_rule_bench --targets {args.targets} "
           f"--seeds {args.seeds}")
    md = render(pieces, cmd, args.chosen)
    print(md)
    if args.write:
        write_section(args.write, md, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
