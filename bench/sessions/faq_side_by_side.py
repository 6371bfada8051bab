"""FAQ's own code next to our session methods at fixed budgets (issue 23 item 3): ESS and coverage.

FAQ = Wu, Nair, Candès (2026), "Efficiently Evaluating LLM Performance with Statistical Guarantees",
github skbwu/efficiently-evaluating-llms. Its code stays in its own folder (``--faq-path``, default
/work/peers/faq: the repository's files, e.g. ``git archive`` of the fetched mirror) and runs with its own
interpreter (``--faq-python``, default /work/peers/faq-venv/bin/python: a venv that sees the project
venv's torch/pandas/scipy/sklearn/tqdm through a .pth file and adds matplotlib, which their scripts import);
``bench/peers/faq_driver.py`` calls their ``factor_models_final.py`` and ``faq_final.trial`` on one piece.

Pieces = the sequential backtest's (``evalplan.core.backtest.sequential_backtest.split_targets``: same regimes,
seed 0, reference cap 100, extrapolation gap 20%), on the 8 shared data sets. Targets per piece:
min(``--targets``, models - gap - 25), so that at least 25 references remain. Items: those every target
of the piece has a score for (all items except on alpacaeval1); a target's truth is its mean there.
Budgets: ``--budgets`` fractions of those items (n = floor(fraction x N), as FAQ's ``int(N * prop)``).

Per (piece, budget), every method's estimate and 95% interval on every target:
* ``faq``: FAQ's factor model with K=8, lambda=1 (``--faq-k/--faq-lmbda``): the setting FAQ's own
  procedure selects on our data (their 5-fold CV and one-standard-error rule, ``--faq-cv``, run on
  openllm_v2_musr interpolation's 100 references over K in {8, 16, 32, 64} x lambda in {1, 0.1}: 1850 s
  on the loaded machine, too slow for every piece); their published fully-observed setting (K=64,
  lambda=0.1, chosen on ~4,000 models) overfits our 25-100 references (its run is kept in
  ``bench/results/faq_side_by_side/k64/``: ``--render --store`` that folder). Then FAQ's ``trial``
  with their tuned hyperparameters (beta0, rho, gamma, tau) of the fully-observed OpenLLM v2 suite
  (``logs/val/best_settings.csv``, nearest budget fraction), ``--seeds`` seeds. Draws are with
  replacement, as in their paper.
* ``uniform``: items drawn uniformly without replacement, the sample mean, Wald interval with the finite
  population correction, ``--seeds`` seeds (numpy; the reference for ESS, and a check: its ESS is ~1).
* ``--methods`` (ours, through ``evalplan.core.backtest.sequential_backtest.replay``, the same session engine as
  the backtest and the service): on the first ``--our-targets`` targets of the piece, ``--our-seeds``
  seeds; one session per (target, seed) run to the largest budget, read at each budget.

ESS (issue 23's definition): the variance of the uniform sample mean without replacement at the same n,
(1 - n/N) S^2 / n (exact, per target), divided by the method's mean squared error, pooled over the
targets and seeds of the piece: sum(var_uniform) / sum(squared error). FAQ's paper reports instead
(uniform width / FAQ width)^2 with a with-replacement uniform; that figure is shown as ``FAQ width-ESS``.
Oracle (``--oracle``, how far 5x is reachable: :func:`perfect_probability_oracle`): a design-based
estimator whose model knows every item's probability (predicted from the references' scores on the item,
cross-fitted), draws proportional to the predicted spread; ESS against uniform with replacement.

Each piece is stored under ``bench/results/faq_side_by_side/`` as it is computed (resumable: a rerun
computes only what a piece lacks). Full command (about 1 h on 2 shared cores):

    EVALPLAN_DATA_DIR=/work/shared/data nice -n 15 python -m bench.sessions.faq_side_by_side \\
        --faq-path /work/peers/faq --methods active_design refgp_v3:1 --our-seeds 2 --oracle \\
        --write docs/RESULTS.md

(the run behind docs/RESULTS.md was split into processes by ``--datasets`` / ``--no-faq`` / ``--methods``
with no names, which the lock-merged pieces allow; ``--render --write docs/RESULTS.md`` rebuilds the
section from the stored pieces).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.markdown_sections import write_section
from bench.common.pieces import load_pieces, piece_path
from bench.sessions.sequential_accuracy_bench import data_dir, load
from evalplan.core.backtest.sequential_backtest import EXTRAPOLATION_GAP, REGIMES, fill_reference_means, split_targets

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "bench" / "results" / "faq_side_by_side"
BEGIN, END = "<!-- faq-side-by-side -->", "<!-- /faq-side-by-side -->"
DATASETS = ("openllm_v2_musr", "openllm_v2_math_hard", "helm_lite_commonsense", "helm_lite_gsm", "helm_lite_math",
            "helm_lite_med_qa", "helm_lite_mmlu", "alpacaeval1")
OPENLLM = ("openllm_v2_musr", "openllm_v2_math_hard")
BUDGETS = (0.025, 0.05, 0.1)
Z95 = 1.959963984540054
MIN_REFERENCES = 25
FAQ_SUITE = "bbh+gpqa+ifeval+math+musr"  # whose tuned FAQ hyperparameters are used


# ---------------------------------------------------------------- pure parts (tests/benches/test_faq_side_by_side.py)

def n_targets_for(n_models: int, regime: str, wanted: int) -> int:
    """Targets of a piece: ``wanted``, fewer where fewer than MIN_REFERENCES references would remain."""
    gap = int(round(EXTRAPOLATION_GAP * n_models)) if regime == "extrapolation" else 0
    return max(2, min(wanted, n_models - gap - MIN_REFERENCES))


def piece_matrix(X: np.ndarray, regime: str, wanted: int, seed: int = 0,
                 ref_cap: int | None = 100) -> dict[str, Any]:
    """The piece's targets' rows ``T`` and references ``R`` (missing cells = the reference's mean) on the
    items every target has, with the split of the sequential backtest."""
    k = n_targets_for(X.shape[0], regime, wanted)
    targets, refs, gap = split_targets(X, regime, k, ref_cap, seed)
    cols = ~np.isnan(X[targets]).any(axis=0)
    T = X[np.ix_(targets, cols)]
    R = fill_reference_means(X[refs][:, cols])
    return {"targets": targets, "refs": refs, "gap": gap, "cols": cols, "T": T, "R": R}


def budget_sizes(n_items: int, fractions: Sequence[float]) -> list[int]:
    """Items at each budget fraction, as FAQ counts them (``int(N * prop)``), at least 2."""
    return [max(2, int(n_items * f)) for f in fractions]


def uniform_variance(z: np.ndarray, n: int) -> float:
    """Variance of the mean of ``n`` items drawn uniformly without replacement from ``z``."""
    N = len(z)
    return float((1.0 - n / N) * np.var(z, ddof=1) / n) if N > 1 else 0.0


def uniform_runs(T: np.ndarray, n: int, seeds: Sequence[int]) -> dict[str, list[list[float]]]:
    """Uniform without replacement, sample mean, Wald interval with the finite-population correction
    (clipped to [0, 1]); per seed, per target."""
    est, lo, hi = [], [], []
    N = T.shape[1]
    for s in seeds:
        rng = np.random.default_rng(1000 + int(s))
        e, a, b = [], [], []
        for z in T:
            x = z[rng.choice(N, size=n, replace=False)]
            m = float(x.mean())
            h = Z95 * math.sqrt(max((1.0 - n / N) * (np.var(x, ddof=1) if n > 1 else 0.0) / n, 0.0))
            e.append(m)
            a.append(max(0.0, m - h))
            b.append(min(1.0, m + h))
        est.append(e)
        lo.append(a)
        hi.append(b)
    return {"estimate": est, "lo": lo, "hi": hi}


def score_method(truth: np.ndarray, var_u: np.ndarray, est: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> dict[str, float]:
    """ESS (sum of uniform variances / sum of squared errors, over targets x seeds), coverage, mean
    width, MAE; ``est``/``lo``/``hi`` are (seeds, targets) for the targets of ``truth``."""
    est, lo, hi = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (est, lo, hi))
    err2 = (est - truth[None, :]) ** 2
    sse = float(err2.sum())
    return {"ess": float(var_u.sum() * est.shape[0] / sse) if sse > 0 else math.inf,
            "coverage": float(((lo <= truth[None, :]) & (truth[None, :] <= hi)).mean()),
            "width": float((hi - lo).mean()), "mae": float(np.sqrt(err2).mean()),
            "n_targets": int(est.shape[1]), "n_seeds": int(est.shape[0])}


def oracle_ess(sigma2: Sequence[float], var_phi: Sequence[float]) -> float:
    """Pooled oracle ESS against uniform with replacement (per-draw variances)."""
    v = float(np.sum(var_phi))
    return float(np.sum(sigma2)) / v if v > 0 else math.inf


def cross_fitted_probabilities(R: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Per item, the target's probability of a 1 predicted from the references' scores on that item
    (L2 logistic regression, C by 3-fold CV), fitted on the other half of the items (even / odd)."""
    from sklearn.linear_model import LogisticRegressionCV

    N = len(z)
    halves = np.arange(N) % 2 == 0
    p = np.empty(N)
    X = R.T
    for h in (halves, ~halves):
        y = z[~h]
        if y.min() == y.max():
            p[h] = np.clip(y.mean(), 0.01, 0.99)
            continue
        folds = int(min(3, min(np.sum(y == 0), np.sum(y == 1))))
        if folds < 2:
            p[h] = np.clip(y.mean(), 0.01, 0.99)
            continue
        model = LogisticRegressionCV(Cs=[0.01, 0.1, 1.0, 10.0], cv=folds, max_iter=300)
        model.fit(X[~h], y)
        p[h] = model.predict_proba(X[h])[:, 1]
    return p


def perfect_probability_oracle(R: np.ndarray, T: np.ndarray, floor: float = 0.05) -> dict[str, Any]:
    """Oracle ESS of a design-based estimator whose model knew each item's probability ``p_j`` (issue 23:
    "the ESS a model with perfect per-item probabilities would reach"), per target, against uniform
    sampling with replacement (per-draw variances; binary scores only):

    * ``ideal``: if ``p`` were the truth, prediction ``p`` and draws q_j proportional to sqrt(p_j (1 - p_j))
      give a per-draw variance (mean sd)^2, uniform sampling mean p(1 - p) + var(p);
    * ``realized``: the same design (with a ``floor`` uniform share) and prediction on the target's actual
      scores: sum_j r_j^2 / q_j / N^2 - mean(r)^2, r = z - p, against var(z).

    ``p`` = :func:`cross_fitted_probabilities` (what the references say, not fitted on the item itself)."""
    out: dict[str, list[float]] = {"ideal_u": [], "ideal_d": [], "real_u": [], "real_d": []}
    for z in T:
        p = np.clip(cross_fitted_probabilities(R, z), 1e-4, 1 - 1e-4)
        sd = np.sqrt(p * (1 - p))
        out["ideal_u"].append(float(np.mean(p * (1 - p)) + np.var(p)))
        out["ideal_d"].append(float(np.mean(sd) ** 2))
        N = len(z)
        q = (1 - floor) * sd / sd.sum() + floor / N
        r = z - p
        out["real_u"].append(float(np.var(z)))
        out["real_d"].append(float(np.sum(r ** 2 / q) / N ** 2 - r.mean() ** 2))
    return {"ideal": oracle_ess(out["ideal_u"], out["ideal_d"]), "realized": oracle_ess(out["real_u"], out["real_d"]),
            "per_target": out}


def summarize(piece: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (budget, method) of a stored piece, with ``vs_faq`` = ESS ratio to FAQ on the same
    targets (the first ``n_targets`` of the piece)."""
    truth = np.asarray(piece["truth"])
    rows = []
    for b in piece["budgets"]:
        n, key = b["n"], str(b["n"])
        var_u = np.asarray(piece["var_uniform"][key])
        scored: dict[str, dict[str, float]] = {}
        sides = {"uniform": piece.get("uniform", {}).get(key), "faq": piece.get("faq", {}).get(key)}
        sides.update({m: r.get(key) for m, r in piece.get("ours", {}).items()})
        for name, r in sides.items():
            if not r:
                continue
            k = len(r["estimate"][0])
            scored[name] = score_method(truth[:k], var_u[:k], np.asarray(r["estimate"]), np.asarray(r["lo"]),
                                        np.asarray(r["hi"]))
            if name == "faq":
                scored[name]["width_ess"] = float(np.mean([
                    (2 * Z95 * np.mean(np.asarray(piece["sd"]) / math.sqrt(n)) / w) ** 2
                    for w in r["mean_width"]]))
        for name, s in scored.items():
            row = {"budget": b["fraction"], "n": n, "method": name, **s}
            if name not in ("faq", "uniform") and "faq" in sides and sides["faq"]:
                k = s["n_targets"]
                f = sides["faq"]
                same = score_method(truth[:k], var_u[:k], np.asarray(f["estimate"])[:, :k],
                                    np.asarray(f["lo"])[:, :k], np.asarray(f["hi"])[:, :k])
                row["faq_ess_same_targets"] = same["ess"]
                row["vs_faq"] = s["ess"] / same["ess"] if same["ess"] > 0 else math.nan
            rows.append(row)
    return rows


# ---------------------------------------------------------------- running the sides

def faq_settings(faq_path: Path, fraction: float) -> dict[str, float]:
    """FAQ's tuned (beta0, rho, gamma, tau) for the fully-observed OpenLLM v2 suite, nearest budget."""
    with (faq_path / "logs" / "val" / "best_settings.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["dataset"] == FAQ_SUITE and float(r["mcar_obs_prob"]) == 1.0]
    best = min(rows, key=lambda r: abs(float(r["prop_budget"]) - fraction))
    return {k: float(best[k]) for k in ("beta0", "rho", "gamma", "tau")} | {"prop_budget": float(best["prop_budget"])}


def run_faq(args: argparse.Namespace, name: str, P: dict[str, Any], budgets: list[dict[str, Any]]) -> dict[str, Any]:
    spec = {"name": name, "K": args.faq_k, "lmbda": args.faq_lmbda, "seeds": list(range(args.seeds)), "threads": 1,
            "budgets": [{"n": b["n"], **faq_settings(args.faq_path, b["fraction"])} for b in budgets]}
    if args.faq_cv:
        spec["cv"] = {"Ks": args.faq_cv_ks, "lmbdas": args.faq_cv_lmbdas}
    with tempfile.TemporaryDirectory(prefix="faq_") as tmp:
        work = Path(tmp)
        np.savez(work / "in.npz", R=P["R"], T=P["T"], spec=json.dumps(spec))
        log = work / "faq.log"
        with log.open("w") as err:
            rc = subprocess.run([args.faq_python, str(ROOT / "bench" / "peers" / "faq_driver.py"), "--faq-path",
                                 str(args.faq_path), str(work / "in.npz"), str(work / "out.json"), str(work / "w")],
                                stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "TQDM_DISABLE": "1"}).returncode
        if rc != 0:
            raise RuntimeError(f"FAQ driver failed on {name}: " + log.read_text()[-2000:])
        out = json.loads((work / "out.json").read_text())
    res: dict[str, Any] = {"factor": out["factor"], "fit_seconds": out["fit_seconds"], "oracle": out["oracle"],
                           "settings": spec["budgets"]}
    for b in budgets:
        runs = [r for r in out["runs"] if r["n"] == b["n"]]
        res[str(b["n"])] = {"estimate": [r["estimate"] for r in runs], "lo": [r["lo"] for r in runs],
                            "hi": [r["hi"] for r in runs], "mean_width": [r["mean_width"] for r in runs],
                            "seconds": float(np.sum([r["seconds"] for r in runs]))}
    return res


DESIGN_METHODS = ("active_design",)  # run through their core entry point, fixed-n interval


def parse_method(spec: str, seeds: int, targets: int) -> tuple[str, int, int]:
    """``NAME[:SEEDS[:TARGETS]]`` -> (name, seeds, targets), the defaults filling what is left out."""
    parts = spec.split(":")
    return parts[0], int(parts[1]) if len(parts) > 1 and parts[1] else seeds, \
        int(parts[2]) if len(parts) > 2 and parts[2] else targets


def run_ours(method: str, P: dict[str, Any], budgets: list[dict[str, Any]], n_targets: int,
             seeds: Sequence[int]) -> dict[str, dict[str, Any]]:
    """Our method on the first ``n_targets`` targets: {row name: {str(n): estimate/lo/hi (seeds x
    targets)}}. ``active_design`` runs through ``run_active_design`` with ``interval_kind="fixed_n"``
    (a fixed-budget comparison) and gives two rows: its reported estimate (the model's, clipped into
    the interval) and ``active_design (design)``, the design-based estimate; other methods run as the
    sequential backtest runs them (``replay``)."""
    n_max = max(b["n"] for b in budgets)
    t0 = time.perf_counter()
    keys = {"estimate": method}
    traj: dict[str, list[list[list[tuple[float, float, float]]]]] = {}  # row -> seed -> target -> step
    if method in DESIGN_METHODS:
        from evalplan.core.sequential.active_design import run_active_design

        keys = {"estimate": method, "design_estimate": f"{method} (design)"}
        for s in seeds:
            rows: dict[str, list[list[tuple[float, float, float]]]] = {k: [] for k in keys}
            for z in P["T"][:n_targets]:
                tr = run_active_design(P["R"], z, budget=n_max, seed=int(s), interval_kind="fixed_n")
                for k in keys:
                    rows[k].append([(float(r[k]), float(r["ci"][0]), float(r["ci"][1])) for r in tr])
            for k in keys:
                traj.setdefault(k, []).append(rows[k])
    else:
        from evalplan.core.backtest.sequential_backtest import replay, session_estimators
        from evalplan.core.sequential.config import SessionConfig
        from evalplan.core.sequential.prior import BucketPrior

        factory = session_estimators()[method]
        prior = BucketPrior.from_reference_scores(P["R"])
        for s in seeds:
            per_target = []
            for z in P["T"][:n_targets]:
                config = SessionConfig(method=method, seed=int(s),
                                       stop={"half_width": 0.0, "level": 0.95, "min_items": 1}, level=0.95)
                e, lo, hi = replay(prior, z, factory, config, level=0.95, score_range=(0.0, 1.0), n_max=n_max)
                per_target.append(list(zip(e.tolist(), lo.tolist(), hi.tolist())))
            traj.setdefault("estimate", []).append(per_target)
    seconds = time.perf_counter() - t0
    out: dict[str, dict[str, Any]] = {}
    for k, name in keys.items():
        res: dict[str, Any] = {"seconds": seconds, "seeds": len(seeds)}
        for b in budgets:
            i = b["n"] - 1
            res[str(b["n"])] = {f: [[float(t[i][j]) for t in per_seed] for per_seed in traj[k]]
                                for j, f in enumerate(("estimate", "lo", "hi"))}
        out[name] = res
    return out


def _merge_save(path: Path, piece: dict[str, Any], keys: dict[str, Any]) -> None:
    """Write ``keys`` (dotted: ``ours.NAME``) into the stored piece under a lock, keeping what other
    processes stored meanwhile (the FAQ pass and ours may run at the same time)."""
    import fcntl

    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cur = json.loads(path.read_text()) if path.exists() else {}
        if cur.get("budgets") != piece["budgets"] or cur.get("targets") != piece["targets"]:
            cur = {k: v for k, v in piece.items() if k not in ("ours", "dates", "faq", "uniform")}
        cur.update({k: v for k, v in piece.items() if k not in ("ours", "dates", "faq", "uniform")})
        for k, v in keys.items():
            node = cur
            *head, last = k.split(".", 1)
            for h in head:
                node = node.setdefault(h, {})
            node[last] = v
        path.write_text(json.dumps(cur, allow_nan=True))
        piece.clear()
        piece.update(cur)


def run_piece(args: argparse.Namespace, name: str, regime: str, path: Path) -> dict[str, Any]:
    _, X = load(name)
    P = piece_matrix(X, regime, args.targets, seed=0, ref_cap=100)
    T = P["T"]
    budgets = [{"fraction": f, "n": n} for f, n in zip(args.budgets, budget_sizes(T.shape[1], args.budgets))]
    piece: dict[str, Any] = {
        "dataset": name, "regime": regime, "budgets": budgets, "targets": P["targets"].tolist(),
        "n_models": int(X.shape[0]), "n_items": int(T.shape[1]), "n_items_all": int(X.shape[1]),
        "n_references": int(len(P["refs"])), "gap": int(P["gap"]), "truth": T.mean(axis=1).tolist(),
        "sd": T.std(axis=1).tolist(),
        "var_uniform": {str(b["n"]): [uniform_variance(z, b["n"]) for z in T] for b in budgets},
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores (shared), Python {platform.python_version()}"}
    _merge_save(path, piece, {})
    n0 = str(budgets[0]["n"])
    now = lambda: time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())  # noqa: E731
    if "uniform" not in piece or len(piece["uniform"][n0]["estimate"]) < args.seeds:
        _merge_save(path, piece, {"uniform": {str(b["n"]): uniform_runs(T, b["n"], range(args.seeds))
                                              for b in budgets}})
    factor = piece.get("faq", {}).get("factor", {})
    stale = not args.faq_cv and (factor.get("K") != args.faq_k or factor.get("lmbda") != args.faq_lmbda)
    if not args.no_faq and ("faq" not in piece or len(piece["faq"][n0]["estimate"]) < args.seeds or stale):
        t0 = time.perf_counter()
        faq = run_faq(args, name, P, budgets)
        faq["seconds"] = time.perf_counter() - t0
        _merge_save(path, piece, {"faq": faq, "dates.faq": now()})
        print(f"{name} {regime}: faq {faq['seconds']:.0f} s", file=sys.stderr, flush=True)
    binary = bool(np.isin(T, (0.0, 1.0)).all())
    if args.oracle and binary and "oracle" not in piece:
        t0 = time.perf_counter()
        orc = perfect_probability_oracle(P["R"], T)
        orc["seconds"] = time.perf_counter() - t0
        _merge_save(path, piece, {"oracle": orc})
        print(f"{name} {regime}: oracle {orc['seconds']:.0f} s", file=sys.stderr, flush=True)
    for spec in args.methods:
        m, seeds, k = parse_method(spec, args.our_seeds, args.our_targets)
        k = min(k, T.shape[0])
        have = piece.get("ours", {}).get(m)
        if have and len(have[n0]["estimate"]) >= seeds and len(have[n0]["estimate"][0]) >= k:
            continue
        rows = run_ours(m, P, budgets, k, range(seeds))
        _merge_save(path, piece, {**{f"ours.{r}": v for r, v in rows.items()}, f"dates.{m}": now()})
        print(f"{name} {regime}: {m} {rows[m]['seconds']:.0f} s", file=sys.stderr, flush=True)
    return piece


# ---------------------------------------------------------------- the docs section

def _f(x: Any, fmt: str = "{:.2f}") -> str:
    return "n/a" if x is None or not math.isfinite(x) else fmt.format(x)


def _x(x: Any) -> str:
    return _f(x, "{:.2f}x")


def _pct(x: Any) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def render(pieces: list[dict[str, Any]], command: str) -> str:
    lines = [BEGIN, f"<!-- written by `{command}` -->",
             "### FAQ side by side at fixed budgets: ESS and coverage (issue 23 item 3)", "",
             "FAQ (Wu, Nair, Candès 2026; their code, run from its own folder by "
             "`bench/peers/faq_driver.py`: their factor model script and their `trial` function) and our methods "
             "on the sequential backtest's pieces (same split: seed 0, <= 100 references, extrapolation = the "
             "best models with a 20% gap; at least 25 references kept). Protocol, ESS and oracle definitions in "
             "`bench/sessions/faq_side_by_side.py`'s docstring. ESS = variance of the uniform sample mean "
             "(without replacement, same n, exact) / the method's mean squared error, pooled over targets x seeds; "
             "cov = coverage of the 95% interval; `uniform` is the sampled check of the ESS reference (~1x). "
             "`ours/FAQ` = ESS ratio on the same targets (ours run on the first targets of each piece, see the "
             "piece table).", ""]
    methods = list(dict.fromkeys(m for p in pieces for m in p.get("ours", {})))
    fractions = sorted({b["fraction"] for p in pieces for b in p["budgets"]})
    head = ["data set", "regime", "budget (n)", "FAQ ESS", "FAQ cov", "FAQ width-ESS", "uniform ESS", "uniform cov"]
    for m in methods:
        head += [f"{m} ESS", f"{m} cov", f"{m}/FAQ"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    all_rows: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for p in pieces:
        rows = summarize(p)
        all_rows += [(p, r) for r in rows]
        for b in p["budgets"]:
            by = {r["method"]: r for r in rows if r["n"] == b["n"]}
            faq, uni = by.get("faq", {}), by.get("uniform", {})
            cells = [p["dataset"], p["regime"], f"{b['fraction']:.1%} ({b['n']})", _x(faq.get("ess", math.nan)),
                     _pct(faq.get("coverage", math.nan)), _x(faq.get("width_ess", math.nan)),
                     _x(uni.get("ess", math.nan)), _pct(uni.get("coverage", math.nan))]
            for m in methods:
                r = by.get(m, {})
                cells += [_x(r.get("ess", math.nan)), _pct(r.get("coverage", math.nan)),
                          _f(r.get("vs_faq", math.nan))]
            lines.append("| " + " | ".join(cells) + " |")
    summary_head = ["budget", "FAQ ESS median (range)", "FAQ ESS median, OpenLLM v2", "FAQ cov median (range)"]
    for m in methods:
        summary_head += [f"{m} ESS median (range)", f"{m} ESS median, OpenLLM v2", f"{m} cov median (range)",
                         f"{m} above FAQ (pieces)"]
    lines += ["", "Summary per budget (median over the pieces; OpenLLM v2 = the two openllm_v2 pieces x 2 regimes):", "",
              "| " + " | ".join(summary_head) + " |", "|" + "---|" * len(summary_head)]

    def med(vals: list[float], unit: str = "x", fmt: str = "{:.2f}") -> str:
        v = [x for x in vals if math.isfinite(x)]
        f = fmt + unit
        return (f.format(np.median(v)) + " (" + f.format(min(v)) + "-" + f.format(max(v)) + ")") if v else "n/a"

    for f in fractions:
        rs = [(p, r) for p, r in all_rows if r["budget"] == f]
        faq = [r for _, r in rs if r["method"] == "faq"]
        faq_o = [r for p, r in rs if r["method"] == "faq" and p["dataset"] in OPENLLM]
        cells = [f"{f:.1%}", med([r["ess"] for r in faq]), med([r["ess"] for r in faq_o]),
                 med([100 * r["coverage"] for r in faq], "%", "{:.1f}")]
        for m in methods:
            mine = [r for _, r in rs if r["method"] == m]
            mine_o = [r for p, r in rs if r["method"] == m and p["dataset"] in OPENLLM]
            above = sum(1 for r in mine if r.get("vs_faq", math.nan) > 1)
            cells += [med([r["ess"] for r in mine]), med([r["ess"] for r in mine_o]),
                      med([100 * r["coverage"] for r in mine], "%", "{:.1f}"), f"{above} of {len(mine)}"]
        lines.append("| " + " | ".join(cells) + " |")
    if any("oracle" in p for p in pieces):
        lines += ["", "Oracle ESS, how far 5x is reachable (`perfect_probability_oracle`: per-item probabilities "
                  "predicted from the references' scores on the item, cross-fitted; draws proportional to their "
                  "spread; against uniform with replacement). `ideal` = if those probabilities were the truth; "
                  "`realized` = the same design and prediction on the targets' actual scores:", "",
                  "| data set | regime | ideal | realized |", "|---|---|---|---|"]
    for p in pieces:
        if "oracle" in p:
            lines.append(f"| {p['dataset']} | {p['regime']} | {_x(p['oracle']['ideal'])} | "
                         f"{_x(p['oracle']['realized'])} |")
    lines += ["", "#### Pieces", "",
              "| data set | regime | models | items N (all) | targets | ours on | references | gap | FAQ factor "
              "(K, lambda) | FAQ (beta0, rho, gamma, tau) per budget | seeds FAQ / ours | seconds FAQ / ours | ran |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in pieces:
        faq = p.get("faq", {})
        fac = faq.get("factor", {})
        sets = "; ".join(f"{s['beta0']:g}, {s['rho']:g}, {s['gamma']:g}, {s['tau']:g}" for s in faq.get("settings", []))
        n0 = str(p["budgets"][0]["n"])
        ours = {m: r for m, r in p.get("ours", {}).items()}
        on = max((len(r[n0]["estimate"][0]) for r in ours.values()), default=0)
        so = max((len(r[n0]["estimate"]) for r in ours.values()), default=0)
        secs = " / ".join([_f(faq.get("seconds", math.nan), "{:.0f}")] + [f"{r['seconds']:.0f}" for r in ours.values()])
        lines.append(f"| {p['dataset']} | {p['regime']} | {p['n_models']} | {p['n_items']} ({p['n_items_all']}) | "
                     f"{len(p['targets'])} | {on} | {p['n_references']} | {p['gap']} | "
                     f"{fac.get('K', 'n/a')}, {fac.get('lmbda', 'n/a')} ({fac.get('selected_by', '')}) | {sets} | "
                     f"{len(faq.get(n0, {}).get('estimate', []))} / {so} | {secs} | "
                     f"{', '.join(f'{k} {v}' for k, v in p.get('dates', {}).items())} |")
    lines += ["", "<!-- interpretation -->", "<!-- /interpretation -->", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--regimes", nargs="+", default=list(REGIMES), choices=list(REGIMES))
    ap.add_argument("--budgets", nargs="+", type=float, default=list(BUDGETS), help="fractions of the items")
    ap.add_argument("--targets", type=int, default=40)
    ap.add_argument("--seeds", type=int, default=5, help="seeds of FAQ and uniform")
    ap.add_argument("--methods", nargs="*", default=["active_design", "refgp_v3:1"],
                    help="our session methods: NAME[:SEEDS[:TARGETS]] (core names)")
    ap.add_argument("--our-targets", type=int, default=40, help="ours run on the first k targets of a piece")
    ap.add_argument("--our-seeds", type=int, default=3)
    ap.add_argument("--faq-path", type=Path, default=Path("/work/peers/faq"))
    ap.add_argument("--faq-python", default="/work/peers/faq-venv/bin/python")
    ap.add_argument("--faq-k", type=int, default=8, help="FAQ's CV choice on openllm_v2_musr's references")
    ap.add_argument("--faq-lmbda", type=float, default=1.0)
    ap.add_argument("--faq-cv", action="store_true", help="choose K, lambda by FAQ's own CV (slow: 5 fits per cell)")
    ap.add_argument("--faq-cv-ks", nargs="+", type=int, default=[8, 16, 32, 64], help="their grid by default")
    ap.add_argument("--faq-cv-lmbdas", nargs="+", type=float, default=[1e1, 1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5])
    ap.add_argument("--no-faq", action="store_true")
    ap.add_argument("--oracle", action="store_true", help="also the perfect-probability oracle (binary pieces)")
    ap.add_argument("--store", type=Path, default=STORE)
    ap.add_argument("--render", action="store_true", help="only rebuild the section from the stored pieces")
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    if not args.render:
        args.store.mkdir(parents=True, exist_ok=True)
        for name in args.datasets:
            for regime in args.regimes:
                run_piece(args, name, regime, piece_path(args.store, name, regime))
    command = "python -m bench.sessions.faq_side_by_side " + " ".join(argv if argv is not None else sys.argv[1:])
    md = render(load_pieces(args.store, DATASETS), command)
    print(md)
    if args.write:
        write_section(args.write, md, BEGIN, END)
    print(f"data: {data_dir()}; numpy {np.__version__}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
