"""tinyBenchmarks' own code next to ``evalplan.core.irt.irt`` on shared data (issue 16 §"faithful IRT").

``nice -n 10 python -m bench.coresets.tinybenchmarks_side_by_side [--data helm_lite_math ...] [--budget 0.1]
[--epochs 2000] [--n-ref N --split stratified|random] [--ours-seeds S ...] [--write docs/RESULTS.md] [--dump DIR]
[--render]``

Each data set's row is kept in ``bench/results/tinybenchmarks_side_by_side/<data>.json`` with the
arguments that produced it; ``--write`` renders the table from all kept rows (so one data set per run
builds up one table), ``--render`` only re-renders it, ``--dump`` keeps both sides' full outputs;
``--ours-seeds`` reruns our side alone at other seeds on a kept row's split (how much the seed moves it).

The peer is felipemaiapolo/tinyBenchmarks (with its py-irt fork, felipemaiapolo/py-irt) in its own
folder (``--peer``, default /work/peers/tinyBenchmarks) and its own virtual environment
(``--peer-python``, default /work/peers/tbvenv/bin/python; py-irt installed there with ``pip install
--no-deps`` of the fork, pyro-ppl, torch); ``bench/peers/tinybenchmarks_driver.py`` runs the steps of
its notebooks with its functions, from its ``tutorials/`` folder. Both sides get the same matrix
(missing cells imputed by the item mean), the same seeded split (30% of the models held out), the
same budget and the same defaults (dimensions 5 and 10, 2000 epochs, lr 0.1, seed 42); the two run at the same time,
in two processes (sec = wall time of each, on a shared machine). Reported:
the IRT fit's agreement (max |a - a'|, |b - b'|), the dimension errors and choice, lambda, the
anchors, and per held-out model the largest estimate difference, and both sides' RMSE / Kendall tau.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau
from sklearn.cluster import KMeans
from sklearn.metrics.pairwise import pairwise_distances

from bench.common.markdown_sections import write_section
from bench.coresets.score_coreset_accuracy import load
from evalplan.core.backtest.backtest import split_models
from evalplan.core.irt.irt import IRTPredictor, IRTSelection, irt_anchors, merge_repeated_anchors

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- tinybenchmarks-side-by-side -->", "<!-- /tinybenchmarks-side-by-side -->"
CACHE = ROOT / "bench" / "results" / "tinybenchmarks_side_by_side"
ROUNDOFF_DRAWS = 5  # perturbed refits of the peer's estimates where the sides differ by more than TOLERANCE
TOLERANCE = 0.10  # issue 35 item 2 (issue 25 item 2 asked 0.15): gp-IRT RMSE within 0.10 points of the peer's


def split(Y: np.ndarray, seed: int = 0, n_ref: int | None = None, how: str = "random"
          ) -> tuple[np.ndarray, np.ndarray]:
    """(references, held out): 30% of the models held out (the default), or ``n_ref`` references chosen by
    :func:`evalplan.core.backtest.backtest.split_models` (``how``: random or stratified on the full score; issue 35
    item 2's splits) and every other model held out."""
    if n_ref is not None:
        ref, test = split_models(Y.mean(axis=1), n_ref, how, np.random.default_rng(seed))
        return Y[ref], Y[test]
    perm = np.random.default_rng(seed).permutation(Y.shape[0])
    n_test = int(round(0.3 * Y.shape[0]))
    return Y[np.sort(perm[n_test:])], Y[np.sort(perm[:n_test])]


def impute(Y: np.ndarray) -> np.ndarray:
    means = np.nanmean(Y, axis=0)
    return np.where(np.isnan(Y), np.where(np.isnan(means), 0.0, means)[None, :], Y)


def start_peer(args: argparse.Namespace, Y_train: np.ndarray, Y_test: np.ndarray, k: int,
               work: Path) -> subprocess.Popen:
    """The peer's run in its own process (it runs while ours does)."""
    src = work / "in.npz"
    np.savez(src, Y_train=Y_train, Y_test=Y_test, k=k, dims=np.array(args.dims), epochs=args.epochs)
    env = {**os.environ, "PATH": f"{Path(args.peer_python).parent}:{os.environ['PATH']}"}
    return subprocess.Popen([args.peer_python, str(ROOT / "bench" / "peers" / "tinybenchmarks_driver.py"), str(src),
                             str(work / "out.json"), str(work / "irt")], cwd=Path(args.peer) / "tutorials", env=env,
                            stdout=subprocess.DEVNULL, stderr=(work / "peer.log").open("w"))


def run_ours(args: argparse.Namespace, Y_train: np.ndarray, Y_test: np.ndarray, k: int, seed: int = 42
             ) -> tuple[dict, float]:
    t0 = time.perf_counter()
    sel = IRTSelection(k=k, seed=seed, epochs=args.epochs).fit(Y_train) if tuple(args.dims) == (5, 10) else \
        IRTSelection(k=k, seed=seed, epochs=args.epochs, dim=args.dims[0]).fit(Y_train)
    pred = IRTPredictor(seed=seed).fit(Y_train, sel.ranking_, sel.weights_, item_params=(sel.a_, sel.b_), bias=sel.bias_)
    est = pred.predict(Y_test[:, sel.ranking_])
    out = {"dim_errors": {str(d): e for d, e in sel.dim_errors_.items()}, "dim": sel.dim_, "lambda": pred.lam_,
           "anchors": sel.ranking_.tolist(), "A": sel.a_.tolist(), "B": sel.b_.tolist(),
           "anchor": pred.weighted_.tolist(), "p_irt": est.p_irt.tolist(), "gp_irt": est.gp_irt.tolist()}
    # the same fit under tinyBenchmarks' own anchor rule (IRTSelection(distinct_anchors=False)): an item
    # nearest two centroids is counted twice instead of the second centroid taking the next nearest item
    listed, w, _ = irt_anchors(sel.a_, sel.b_, k, seed, distinct=False)
    if len(set(listed.tolist())) < k:
        items, weights, listing = merge_repeated_anchors(listed, w)
        alt = IRTPredictor(seed=seed).fit(Y_train, items, weights, item_params=(sel.a_, sel.b_), bias=sel.bias_,
                                          listing=listing)
        e2 = alt.predict(Y_test[:, items])
        out["their_rule"] = {"anchors": listed.tolist(), "anchor": alt.weighted_.tolist(), "p_irt": e2.p_irt.tolist(),
                             "gp_irt": e2.gp_irt.tolist()}
    return out, time.perf_counter() - t0


def compare(name: str, args: argparse.Namespace) -> dict:
    Y = impute(load(name))
    Y_train, Y_test = split(Y, n_ref=args.n_ref, how=args.split)
    k = max(1, int(round(args.budget * Y.shape[1])))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        proc = start_peer(args, Y_train, Y_test, k, Path(tmp))
        ours, ours_s = run_ours(args, Y_train, Y_test, k)
        if proc.wait() != 0:
            raise RuntimeError("the peer failed: " + (Path(tmp) / "peer.log").read_text()[-2000:])
        peer, peer_s = json.loads((Path(tmp) / "out.json").read_text()), time.perf_counter() - t0
    truth = Y_test.mean(axis=1)
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        (args.dump / f"{name}.json").write_text(json.dumps({"peer": peer, "ours": ours, "truth": truth.tolist()}))
    irt_src = (ROOT / "src" / "evalplan" / "core" / "irt" / "irt.py").read_bytes()
    row: dict = {"args": {"budget": args.budget, "epochs": args.epochs, "dims": list(args.dims),
                          **({"n_ref": args.n_ref, "split": args.split} if args.n_ref is not None else {}),
                          "irt_py_sha1": hashlib.sha1(irt_src).hexdigest()[:12]},
                 "data": name, "shape": f"{Y.shape[0]} x {Y.shape[1]}", "train": Y_train.shape[0],
                 "test": Y_test.shape[0], "k": k, "peer_s": peer_s, "ours_s": ours_s,
                 "dim_peer": peer["dim"], "dim_ours": ours["dim"], "dim_err_peer": peer["dim_errors"],
                 "dim_err_ours": ours["dim_errors"], "lam_peer": peer["lambda"], "lam_ours": ours["lambda"]}
    if peer["dim"] == ours["dim"]:
        row["max_da"] = float(np.abs(np.asarray(peer["A"]) - np.asarray(ours["A"])).max())
        row["max_db"] = float(np.abs(np.asarray(peer["B"]) - np.asarray(ours["B"])).max())
    pa = peer["anchors"]
    row["peer_duplicates"] = len(pa) - len(set(pa))
    row["anchors_peer"], row["anchors_ours"] = pa, ours["anchors"]
    row["same_anchors"] = len(set(pa) & set(ours["anchors"]))
    row["differing_anchors_tied"] = tied_differences(peer, ours, k)
    for est in ("anchor", "p_irt", "gp_irt"):
        p, o = np.asarray(peer[est]), np.asarray(ours[est])
        row[f"{est}_maxdiff"] = float(np.abs(p - o).max())
        row[f"{est}_rmse_peer"] = float(np.sqrt(np.mean((p - truth) ** 2)))
        row[f"{est}_rmse_ours"] = float(np.sqrt(np.mean((o - truth) ** 2)))
        row[f"{est}_tau_peer"] = float(kendalltau(p, truth)[0])
        row[f"{est}_tau_ours"] = float(kendalltau(o, truth)[0])
    row["gp_irt_rmse_absdiff"] = abs(row["gp_irt_rmse_peer"] - row["gp_irt_rmse_ours"])
    if "their_rule" in ours:  # our fit with the notebook's repeated anchors (distinct_anchors=False)
        t = ours["their_rule"]
        row["their_rule"] = {"repeats": len(t["anchors"]) - len(set(t["anchors"])),
                             "same_anchor_list": sorted(t["anchors"]) == sorted(pa),
                             "gp_irt_maxdiff": float(np.abs(np.asarray(peer["gp_irt"]) - np.asarray(t["gp_irt"])).max()),
                             **{f"{e}_rmse_ours": float(np.sqrt(np.mean((np.asarray(t[e]) - truth) ** 2)))
                                for e in ("anchor", "p_irt", "gp_irt")}}
    their = abs(row["gp_irt_rmse_peer"] - row.get("their_rule", {}).get("gp_irt_rmse_ours", row["gp_irt_rmse_peer"]))
    if max(row["gp_irt_rmse_absdiff"], their) > TOLERANCE / 100:
        row["roundoff"] = roundoff_spread(peer, Y_train, Y_test)
    print(json.dumps(row), flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    cell_path(name, args).write_text(json.dumps(row, indent=1) + "\n")
    return row


def roundoff_spread(peer: dict, Y_train: np.ndarray, Y_test: np.ndarray, draws: int = ROUNDOFF_DRAWS) -> dict:
    """Where the two sides are more than the tolerance apart: the peer's own estimates (its anchor list,
    weights, lambda and item parameters, through our predictor, which on these inputs gives the peer's
    numbers; checked as ``exact``) again with the item parameters perturbed at float32 round-off (relative
    2^-24 Gaussian noise, seeds 0..draws-1), the size of the difference the two SVI implementations
    (float32, parameters ~1e-7 apart) can leave. Returns the gp-IRT RMSE per draw and the unperturbed."""
    items, weights, listing = merge_repeated_anchors(peer["anchors"], peer["weights"])
    A, B = np.asarray(peer["A"]), np.asarray(peer["B"])
    truth = Y_test.mean(axis=1)

    def gp(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        pred = IRTPredictor(seed=42, lam=peer["lambda"]).fit(Y_train, items, weights, item_params=(a, b),
                                                              listing=listing)
        return pred.predict(Y_test[:, items]).gp_irt

    base = gp(A, B)
    out: dict = {"exact": float(np.abs(base - np.asarray(peer["gp_irt"])).max()),
                 "gp_irt_rmse": float(np.sqrt(np.mean((base - truth) ** 2))), "perturbed": []}
    for r in range(draws):
        rng = np.random.default_rng(r)
        est = gp(A * (1 + 2.0 ** -24 * rng.standard_normal(A.shape)), B * (1 + 2.0 ** -24 * rng.standard_normal(B.shape)))
        out["perturbed"].append(float(np.sqrt(np.mean((est - truth) ** 2))))
    return out


def tied_differences(peer: dict, ours: dict, k: int, tol: float = 1e-9) -> int:
    """How many of the peer's anchors that ours lacks are a tie: the notebook's KMeans on the peer's
    item embeddings puts it in a cluster whose two items nearest the centroid are within ``tol`` of it
    (a cluster of two items: the centroid is their midpoint), so round-off picks the anchor."""
    X = np.column_stack([np.asarray(peer["A"]), np.asarray(peer["B"])])
    km = KMeans(n_clusters=k, n_init="auto", random_state=42).fit(X, sample_weight=np.full(len(X), 1.0 / len(X)))
    D = np.sort(pairwise_distances(km.cluster_centers_, X), axis=1)
    tied = D[:, 1] - D[:, 0] <= tol if X.shape[0] > 1 else np.zeros(k, dtype=bool)
    nearest = pairwise_distances(km.cluster_centers_, X).argmin(axis=1)
    missing = set(peer["anchors"]) - set(ours["anchors"])
    return int(sum(1 for c in range(k) if int(nearest[c]) in missing and tied[c]))


def cell_path(name: str, args: argparse.Namespace) -> Path:
    """The kept row of one data set and split (100-epoch rows untagged; other epoch counts kept apart)."""
    tag = "" if args.n_ref is None else f"__{args.split}{args.n_ref}_b{args.budget:g}"
    tag += "" if args.epochs == 100 else f"_e{args.epochs}"
    return CACHE / f"{name}{tag}.json"


def ours_at_seeds(name: str, args: argparse.Namespace) -> dict:
    """``--ours-seeds``: our pipeline alone, on the kept row's split, at other seeds (the SVI draws and
    the KMeans start; the peer's seed is fixed at 42 in its ``irt.py``), added to the row as
    ``ours_seeds``: how far the seed alone moves gp-IRT's RMSE on this split."""
    path = cell_path(name, args)
    row = json.loads(path.read_text())
    Y = impute(load(name))
    Y_train, Y_test = split(Y, n_ref=args.n_ref, how=args.split)
    truth = Y_test.mean(axis=1)
    seeds = row.setdefault("ours_seeds", {})
    for seed in args.ours_seeds:
        ours, sec = run_ours(args, Y_train, Y_test, row["k"], seed=seed)
        rmse = {e: float(np.sqrt(np.mean((np.asarray(ours[e]) - truth) ** 2))) for e in ("gp_irt", "p_irt", "anchor")}
        seeds[str(seed)] = {"dim": ours["dim"], "lambda": ours["lambda"], "bias": ours["dim_errors"][str(ours["dim"])],
                            "gp_irt_rmse": rmse["gp_irt"], "p_irt_rmse": rmse["p_irt"], "anchor_rmse": rmse["anchor"],
                            "anchors_in_common_with_peer": len(set(ours["anchors"]) & set(row["anchors_peer"])),
                            "sec": sec}
        print(json.dumps({"data": name, "seed": seed, **seeds[str(seed)]}), flush=True)
        path.write_text(json.dumps(row, indent=1) + "\n")
    return row


def stored_rows() -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted(CACHE.glob("*.json"))]


def seed_command(r: dict) -> str:
    return command(r).replace(" --write", f" --ours-seeds {' '.join(r['ours_seeds'])} --write")


def seed_table(rows: list[dict]) -> list[str]:
    """Rows with ``ours_seeds``: our gp-IRT RMSE at other seeds next to both sides' at seed 42."""
    rows = [r for r in rows if r.get("ours_seeds")]
    if not rows:
        return []
    out = ["", "Our pipeline alone at other seeds (`--ours-seeds`; the SVI draws and the KMeans start; same split, "
           "same epochs), next to both sides at seed 42: gp-IRT RMSE x100 (D, λ).", "",
           "| data | peer / ours at 42 | ours at other seeds | range over the seeds (42 included) | SD |",
           "|---|---|---|---|---|"]
    for r in rows:
        s = r["ours_seeds"]
        vals = [r["gp_irt_rmse_ours"]] + [v["gp_irt_rmse"] for v in s.values()]
        cells = ", ".join(f"{k}: {v['gp_irt_rmse'] * 100:.2f} ({v['dim']}, {v['lambda']:.2f})" for k, v in s.items())
        out.append(f"| {r['data']}{split_label(r)}, {r['args']['budget']} / {r['args']['epochs']} | "
                   f"{r['gp_irt_rmse_peer'] * 100:.2f} / {r['gp_irt_rmse_ours'] * 100:.2f} ({r['dim_ours']}, "
                   f"{r['lam_ours']:.2f}) | {cells} | {min(vals) * 100:.2f}-{max(vals) * 100:.2f} | "
                   f"{np.std(vals, ddof=1) * 100:.2f} |")
    out += ["", "Commands:", ""] + [f"- `{seed_command(r)}`" for r in rows]
    return out


def command(r: dict) -> str:
    a = r["args"]
    dims = "" if a["dims"] == [5, 10] else f" --dims {' '.join(map(str, a['dims']))}"
    dims += f" --n-ref {a['n_ref']} --split {a['split']}" if "n_ref" in a else ""
    return (f"nice -n 10 python -m bench.coresets.tinybenchmarks_side_by_side --data {r['data']} --budget {a['budget']} "
            f"--epochs {a['epochs']}{dims} --write docs/RESULTS.md")


def their_rule(r: dict) -> str:
    """The Δ of our fit under the notebook's repeated-anchor rule, where it repeats an item."""
    if "their_rule" not in r:
        return ""
    d = abs(r["gp_irt_rmse_peer"] - r["their_rule"]["gp_irt_rmse_ours"]) * 100
    return f" (their anchor rule: {d:.3f} {'✓' if d <= TOLERANCE else '✗'})"


def roundoff(r: dict) -> str:
    """The peer's own gp-IRT RMSE with its item parameters perturbed at float32 round-off (5 draws)."""
    if "roundoff" not in r:
        return ""
    v = np.asarray(r["roundoff"]["perturbed"]) * 100
    return f"; the peer's own at float32 round-off of its a, b: {v.min():.2f}-{v.max():.2f}"


def ties(r: dict) -> str:
    return f"; {r['differing_anchors_tied']}" if "differing_anchors_tied" in r else ""


def split_label(r: dict) -> str:
    a = r["args"]
    return f" ({a['n_ref']} {a['split']} refs)" if "n_ref" in a else ""


def markdown(rows: list[dict]) -> str:
    out = [START, "## tinyBenchmarks' own code vs `evalplan.core.irt.irt` (irt / gp_irt / p_irt), same data, same run", "",
           "One row per run of `nice -n 10 python -m bench.coresets.tinybenchmarks_side_by_side --data DATA --budget B "
           "--epochs E --write docs/RESULTS.md` (rows kept in `bench/results/tinybenchmarks_side_by_side/`; the exact "
           "commands are listed below the table). The peer (felipemaiapolo/tinyBenchmarks + its py-irt fork) runs its "
           "notebooks' steps with its own functions from its own folder and environment "
           "(`bench/peers/tinybenchmarks_driver.py`); ours is `IRTSelection` + `IRTPredictor`. Same matrix (missing "
           "cells imputed by the item mean), same seeded split (30% of the models held out, the rest are the "
           "references; where the data cell says \"(N stratified / random refs)\", `--n-ref N --split S`: N "
           "references chosen by `evalplan.core.backtest.backtest.split_models`, every other model held out, issue 35 "
           "item 2), budget B of the items, their defaults (D in {5, 10} by their validation heuristic, E SVI "
           "epochs, lr 0.1, seed 42). RMSE in points (x100) on the held-out models; τ = Kendall tau-b; "
           f"Δ = abs(gp-IRT RMSE peer - ours) in points, ✓ when within {TOLERANCE} (issue 35 item 2; issue 25 asked 0.15).", "",
           "| data | B / E | refs / test | k | D peer / ours (val. error x100) | λ peer / ours | max abs(a-a'), abs(b-b') | "
           "anchors in common (peer dup.; of the others, ties) | max abs(gp-IRT diff) x100 | gp-IRT RMSE peer / ours | Δ gp-IRT RMSE | "
           "p-IRT RMSE peer / ours | anchor RMSE peer / ours | gp-IRT τ peer / ours | sec peer / ours |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        de = lambda d: "/".join(f"{float(v) * 100:.2f}" for v in d.values())  # noqa: E731
        fit = f"{r['max_da']:.1e}, {r['max_db']:.1e}" if "max_da" in r else "n/a (other D)"
        delta = abs(r["gp_irt_rmse_peer"] - r["gp_irt_rmse_ours"]) * 100
        out.append(
            f"| {r['data']}{split_label(r)} | {r['args']['budget']} / {r['args']['epochs']} | {r['train']} / {r['test']} | {r['k']} | "
            f"{r['dim_peer']} ({de(r['dim_err_peer'])}) / {r['dim_ours']} ({de(r['dim_err_ours'])}) | "
            f"{r['lam_peer']:.3f} / {r['lam_ours']:.3f} | {fit} | "
            f"{r['same_anchors']} / {r['k']} ({r['peer_duplicates']}{ties(r)}) | {r['gp_irt_maxdiff'] * 100:.3f} | "
            f"{r['gp_irt_rmse_peer'] * 100:.2f} / {r['gp_irt_rmse_ours'] * 100:.2f} | "
            f"{delta:.3f} {'✓' if delta <= TOLERANCE else '✗'}{their_rule(r)}{roundoff(r)} | "
            f"{r['p_irt_rmse_peer'] * 100:.2f} / {r['p_irt_rmse_ours'] * 100:.2f} | "
            f"{r['anchor_rmse_peer'] * 100:.2f} / {r['anchor_rmse_ours'] * 100:.2f} | "
            f"{r['gp_irt_tau_peer']:.3f} / {r['gp_irt_tau_ours']:.3f} | {r['peer_s']:.0f} / {r['ours_s']:.0f} |")
    out += ["", "Commands:", ""] + [f"- `{command(r)}`" for r in rows]
    out += seed_table(rows)
    out += ["", "<!-- interpretation -->", "<!-- /interpretation -->", END]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", nargs="+", default=["helm_lite_math"])
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--epochs", type=int, default=2000)
    ap.add_argument("--dims", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--n-ref", type=int, default=None,
                    help="references (every other model held out) instead of the 70 / 30 split")
    ap.add_argument("--split", default="random", choices=("random", "stratified"), help="how --n-ref are chosen")
    ap.add_argument("--peer", default="/work/peers/tinyBenchmarks")
    ap.add_argument("--peer-python", default="/work/peers/tbvenv/bin/python")
    ap.add_argument("--write", type=Path)
    ap.add_argument("--dump", type=Path, help="folder for both sides' full outputs (one JSON per data set)")
    ap.add_argument("--render", action="store_true", help="only re-render --write from the kept rows")
    ap.add_argument("--ours-seeds", type=int, nargs="+",
                    help="only run our pipeline at these seeds on the kept row's split (added to that row)")
    args = ap.parse_args()
    if not args.render:
        for name in args.data:
            if args.ours_seeds:
                ours_at_seeds(name, args)
            else:
                compare(name, args)
    if args.write:
        write_section(args.write, markdown(stored_rows()), START, END)


if __name__ == "__main__":
    main()
