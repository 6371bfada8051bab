"""The checkpoint loop on REAL training checkpoints (issue 33 item 2: "add any real training-checkpoint series you
can find in a PyPI package").

No PyPI package ships item-level scores of LLM training checkpoints (Pythia's and OLMo's checkpoints are weights on
Hugging Face, unreachable here, and too large to run on 2 CPU cores). What a package does ship is a dataset small
enough to train on here: scikit-learn's bundled handwritten digits (``sklearn.datasets.load_digits``, 1,797 8x8
images, in the wheel). This bench trains real models on it and records every epoch's per-item correctness, so
each series is one real training run's checkpoints, with the dynamics the checkpoint loop meets (items learnt,
forgotten and relearnt between epochs), only on a small classifier instead of an LLM.

Runs (``training_matrix``, deterministic, ~1 min on one core): a seeded half of the images (898) are the items;
each of ``--runs`` runs trains a one-hidden-layer MLP (torch, CPU) from its own seed on its own random training
subset of the other half, with its own width, subset size and learning rate (so runs differ in skill as models
do), for ``EPOCHS`` epochs of minibatch SGD; after every epoch the run's correctness on each item is a row
(``run07/epoch03``).

Cases: ``--targets`` runs drawn at random; the target is the run's checkpoint at epoch ``--target-epoch`` (its
scores: the truth), ``previous`` its earlier checkpoints (``all``: every earlier epoch; ``last``: the one before;
``partial``: the one before, observed on a random 20% of the items, what an earlier session leaves). References:
``--ref-cap`` checkpoints drawn among the OTHER runs' (all epochs), exactly the service's with-``previous`` prior
(:func:`evalplan.core.sequential.checkpoints.with_previous`). Sessions as in ``checkpoint_series_bench`` (its
``_case``): ``random`` on the target, the default (``active_design``, ``previous`` in its prior) and the default
with the opt-in flip model (``use_previous``); items to ±0.02 / ±0.03 at 95%, coverage at the stop.

    nice -n 10 python -m bench.sessions.training_checkpoints_bench --write docs/RESULTS.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.markdown_sections import INTERPRETATION, write_section
from bench.sessions.checkpoint_series_bench import HWS, _case

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- training-checkpoints -->", "<!-- /training-checkpoints -->"
EPOCHS = 8
WIDTHS = (8, 16, 32, 64)
SUBSETS = (40, 80, 160, 320)
LRS = (0.02, 0.05, 0.1)


def training_matrix(n_runs: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """(row names, checkpoints x items 0/1 correctness) of ``n_runs`` real training runs on the digits."""
    import torch
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    perm = np.random.default_rng(seed).permutation(len(y))
    items, pool = perm[: len(y) // 2], perm[len(y) // 2:]
    Xi, yi = torch.from_numpy(X[items]), torch.from_numpy(y[items])
    names, rows = [], []
    torch.set_num_threads(1)
    for r in range(n_runs):
        rng = np.random.default_rng([seed, r])
        width, size, lr = int(rng.choice(WIDTHS)), int(rng.choice(SUBSETS)), float(rng.choice(LRS))
        train = rng.choice(pool, size=size, replace=False)
        Xt, yt = torch.from_numpy(X[train]), torch.from_numpy(y[train])
        torch.manual_seed(1000 * seed + r)
        net = torch.nn.Sequential(torch.nn.Linear(64, width), torch.nn.ReLU(), torch.nn.Linear(width, 10))
        opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
        for epoch in range(1, EPOCHS + 1):
            order = torch.from_numpy(rng.permutation(size))
            for start in range(0, size, 16):
                batch = order[start:start + 16]
                opt.zero_grad()
                torch.nn.functional.cross_entropy(net(Xt[batch]), yt[batch]).backward()
                opt.step()
            with torch.no_grad():
                rows.append((net(Xi).argmax(dim=1) == yi).numpy().astype(np.float64))
            names.append(f"run{r:02d}/epoch{epoch:02d}")
    return names, np.vstack(rows)


def cases(names: list[str], X: np.ndarray, n_targets: int, target_epoch: int, seed: int) -> list[dict[str, Any]]:
    runs = sorted({n.split("/")[0] for n in names})
    idx = {n: i for i, n in enumerate(names)}
    rng = np.random.default_rng(seed)
    out = []
    for run in rng.choice(runs, size=min(n_targets, len(runs)), replace=False):
        series = [X[idx[f"{run}/epoch{e:02d}"]] for e in range(1, target_epoch + 1)]
        target, earlier = series[-1], series[:-1]
        partial = earlier[-1].copy()
        partial[rng.random(X.shape[1]) >= 0.2] = np.nan
        exclude = [n for n in names if n.startswith(f"{run}/")]
        agree = float(np.mean(earlier[-1] == target))
        for kind, prev in ((f"epochs 1-{target_epoch - 1}", earlier), (f"epoch {target_epoch - 1} only", earlier[-1:]),
                           (f"epoch {target_epoch - 1} on 20% of items", [partial])):
            out.append({"kind": kind, "label": f"{run}/epoch{target_epoch:02d}", "target": target, "previous": prev,
                        "exclude": exclude, "agree": agree})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--targets", type=int, default=6)
    ap.add_argument("--target-epoch", type=int, default=EPOCHS)
    ap.add_argument("--ref-cap", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    names, X = training_matrix(args.runs, args.seed)
    finals = X[[i for i, n in enumerate(names) if n.endswith(f"epoch{EPOCHS:02d}")]].mean(axis=1)
    print(f"{len(names)} checkpoints x {X.shape[1]} items in {time.perf_counter() - t0:.0f} s; final accuracy "
          f"{finals.min():.2f}-{finals.max():.2f}", file=sys.stderr)
    session_args = argparse.Namespace(seed=args.seed, ref_cap=args.ref_cap, seeds=1, baseline="random",
                                      no_none=True, before=True)
    groups: dict[str, dict[str, list[Any]]] = {}
    targets = []
    for case in cases(names, X, args.targets, args.target_epoch, args.seed):
        per = _case((case, names, X, session_args, ["active_design"], X.shape[1]))[0]["active_design"]
        g = groups.setdefault(case["kind"], {"agree": [], "base": [], "before": [], "prev": []})
        g["agree"].append(case["agree"])
        for key in ("base", "before", "prev"):
            g[key].append(per[key])
        targets.append(float(case["target"].mean()))
        print(case["kind"], case["label"], f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    lines = []
    for kind, g in groups.items():
        cells = [kind, str(len(g["base"])), f"{100 * np.mean(g['agree']):.0f}%"]
        for h in HWS:
            items = {k: float(np.mean([r[h][0] for r in g[k]])) for k in ("base", "before", "prev")}
            cov = {k: [r[h][2] for r in g[k] if r[h][2] is not None] for k in ("base", "before", "prev")}
            cells.append(" / ".join(f"{items[k]:.0f}" for k in ("base", "before", "prev")))
            cells.append(f"**{items['before'] / items['base']:.2f}x** / {items['prev'] / items['base']:.2f}x")
            cells.append(" / ".join(f"{100 * np.mean(c):.0f}% of {len(c)}" if c else "n/a" for c in cov.values()))
        lines.append("| " + " | ".join(cells) + " |")
    cmd = "python -m bench.sessions.training_checkpoints_bench" + (
        " " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    head = ["previous", "targets", "agreement of the last previous with the target"]
    for h in HWS:
        head += [f"items to ±{h}: random / default / default + flip model", f"default / random, flip / random at ±{h}",
                 f"coverage at ±{h}: random / default / flip"]
    md = "\n".join([
        BEGIN,
        "### The checkpoint loop on real training checkpoints (issue 33 item 2)",
        "",
        f"Command: `nice -n 10 {cmd}` ({time.perf_counter() - t0:.0f} s). Data and protocol: "
        "`bench/sessions/training_checkpoints_bench.py`'s docstring: real training runs of small MLPs on "
        f"scikit-learn's bundled digits ({len(names)} checkpoints of {args.runs} runs x {X.shape[1]} items, "
        f"final accuracies {finals.min():.2f}-{finals.max():.2f}; targets' accuracy "
        f"{min(targets):.2f}-{max(targets):.2f}), the target a run's epoch-{args.target_epoch} checkpoint, "
        f"references {args.ref_cap} checkpoints of the other runs; one session per (target, method), 95%, items "
        "censored at N.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *lines,
        "",
        INTERPRETATION[0],
        INTERPRETATION[1],
        END,
    ])
    print(md)
    if args.write:
        write_section(ROOT / args.write if not args.write.is_absolute() else args.write, md, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
