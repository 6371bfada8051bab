"""The peers' own code beside our re-implementations on a small real case (issue 11 §3).

    python -m bench.sessions.peer_equality [--proeval /work/peers/proeval] [--fluid /work/peers/fluid-benchmarking]
                                  [--items 300] [--references 40] [--budget 60] [--write docs/RESULTS.md]

The peers run from their own checkouts (``git archive`` of google-deepmind/proeval and
allenai/fluid-benchmarking, outside the project; nothing of theirs is imported by ``app``):

* ProEval: ``proeval.sampler.data.setup_train_test_split`` + ``proeval.sampler.bq._bq_active_sampling``
  (BQ-SF, ``noise_variance=0.3``, ``n_init=0``: ``BQPriorSampler``'s defaults) on the first ``--items``
  items of openllm_v2_musr, ``--references`` reference models and one target; compared with
  ``proeval_bq``: the items chosen, ``estimates[t]`` (after t observations) and the integral variance.
  (``proeval/__init__.py`` imports its LLM clients; the sampler modules are loaded without it.)
  Each peer runs in a subprocess with ``--peer-python`` in its own folder.
* Fluid Benchmarking: ``fluid_benchmarking.engine.run_fluid_benchmarking`` (MAP, its defaults) with
  the IRT parameters ``fluid_irt`` uses (ours, from ``evalplan.core.irt.irt_jml.fit_2pl``; the peer fits them with
  py-irt): compared with ``fluid_irt``: the items chosen and the abilities.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from bench.common.markdown_sections import write_section
from bench.sessions.sequential_accuracy_bench import load
from evalplan.core.sequential import BucketPrior, SessionConfig, make_estimator

BEGIN, END = "<!-- peer-equality -->", "<!-- /peer-equality -->"


PROEVAL_DRIVER = """
import json, sys
import numpy as np
sys.path.insert(0, ".")
import types, importlib
for name, path in (("proeval", "proeval"), ("proeval.sampler", "proeval/sampler")):
    pkg = types.ModuleType(name); pkg.__path__ = [path]; sys.modules[name] = pkg  # skip proeval/__init__ (LLM clients)
data = importlib.import_module("proeval.sampler.data"); bq = importlib.import_module("proeval.sampler.bq")
z = np.load(sys.argv[1])
_pre, test_x, test_y, u, S = data.setup_train_test_split(z["matrix"], 0)
res = bq._bq_active_sampling(test_x, test_y, u, S, budget=int(z["budget"]) + 1, n_init=0, noise_variance=0.3)
print(json.dumps({"items": [int(i) for i in res.selected_indices], "estimates": res.estimates.tolist(),
                  "variance": res.integral_variance.tolist()}))
"""
FLUID_DRIVER = """
import json, sys
import numpy as np
sys.path.insert(0, ".")
from fluid_benchmarking import engine
z = np.load(sys.argv[1])
out = engine.run_fluid_benchmarking(lm_responses=z["y"], irt_model=z["irt"], start_ability=0.0,
                                    n_max=int(z["budget"]), method="map")
print(json.dumps({"items": [int(i) for i in out["items_fb"]], "abilities": [float(t) for t in out["abilities_fb"]]}))
"""


def run_peer(python: Path, root: Path, driver: str, **arrays: np.ndarray) -> dict:
    """Run ``driver`` with the peer's interpreter in the peer's folder on ``arrays`` (an .npz)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.npz"
        np.savez(path, **arrays)
        out = subprocess.run([str(python), "-c", driver, str(path)], cwd=root, capture_output=True, text=True,
                             check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--proeval", type=Path, default=Path("/work/peers/proeval"))
    ap.add_argument("--fluid", type=Path, default=Path("/work/peers/fluid-benchmarking"))
    ap.add_argument("--peer-python", type=Path, default=Path("/work/peers/proeval/venv/bin/python"),
                    help="an interpreter with numpy and pandas, outside the project's environment")
    ap.add_argument("--dataset", default="openllm_v2_musr")
    ap.add_argument("--items", type=int, default=300)
    ap.add_argument("--references", type=int, default=40)
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    _names, X = load(args.dataset)
    X = X[:, :args.items]
    keep = ~np.isnan(X).any(axis=1)
    X = X[keep][: args.references + 1]
    target, refs = X[0], X[1:]
    prior = BucketPrior.from_reference_scores(refs)
    lines = [BEGIN, "## Peers' code beside the re-implementations", "",
             f"`python -m bench.sessions.peer_equality --items {args.items} --references {args.references} --budget "
             f"{args.budget}`: {args.dataset}, the first {args.items} items, {args.references} reference models, "
             f"one target, {args.budget} sequential observations. The peers run from their own checkouts with their own interpreter (a subprocess).", "",
             "| peer | what is compared | ours vs theirs |", "|---|---|---|"]

    res = run_peer(args.peer_python, args.proeval, PROEVAL_DRIVER, matrix=np.column_stack([target, refs.T]),
                   budget=np.array(args.budget))
    est = make_estimator(prior, SessionConfig(method="proeval_bq", epsilon2=0.0))
    ours_items, ours_est, ours_var = [], [est.estimate], [est.variance]
    for _ in range(args.budget):
        i = est.propose()[0]
        ours_items.append(i)
        est.observe(i, float(target[i]))
        ours_est.append(est.estimate)
        ours_var.append(est.variance)
    same = ours_items == [int(i) for i in res["items"][: args.budget]]
    d_est = float(np.max(np.abs(np.asarray(ours_est) - np.asarray(res["estimates"][: args.budget + 1]))))
    d_var = float(np.max(np.abs(np.asarray(ours_var) - np.asarray(res["variance"][: args.budget + 1]))))
    lines.append(f"| ProEval `_bq_active_sampling` (BQ-SF defaults) | {args.budget} items chosen; estimates and "
                 f"integral variance after 0..{args.budget} observations | items identical: {same}; max |estimate "
                 f"diff| {d_est:.1e}; max |variance diff| {d_var:.1e} |")

    est = make_estimator(prior, SessionConfig(method="fluid_irt", epsilon2=0.0))
    irt = est.irt
    y01 = (target - irt.lo) / (irt.hi - irt.lo)
    theirs = run_peer(args.peer_python, args.fluid, FLUID_DRIVER, y=y01, irt=np.column_stack([irt.a, irt.b]),
                      budget=np.array(args.budget))
    ours_items, ours_theta = [], []
    for _ in range(args.budget):
        i = est.propose()[0]
        ours_items.append(i)
        est.observe(i, float(target[i]))
        ours_theta.append(est.theta)
    same_f = ours_items == [int(i) for i in theirs["items"]]
    d_theta = float(np.max(np.abs(np.asarray(ours_theta) - np.asarray(theirs["abilities"]))))
    lines.append(f"| Fluid Benchmarking `run_fluid_benchmarking` (MAP defaults, our IRT parameters) | {args.budget} items "
                 f"chosen; abilities after each | items identical: {same_f}; max |ability diff| {d_theta:.1e} |")
    lines.append(END)
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(args.write, text, BEGIN, END)
    ok = same and same_f and d_est < 1e-8 and d_var < 1e-8 and d_theta < 1e-6
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
