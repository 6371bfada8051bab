"""The README's "CI loop", runnable as it is, against a running service (./dev.sh serve) in a few seconds:

    python examples/ci_loop.py      # EVALPLAN_URL (default http://127.0.0.1:8000), EVALPLAN_DATA_DIR (../shared/data)

README.md shows this file from the marker line on (tests/deploy/test_readme_ci_loop.py checks that, and runs it).
The setup above the marker stands in for your CI job's own: MuSR's reference models (every model of the shared
data's matrix but the last two, uploaded unless the server already has a ``musr`` benchmark), ``run_my_model``
(here the real scores of the matrix's last model, upstage/solar-pro-preview-instruct, playing "my-ckpt-123"; yours
runs the model on the item), and ``previous_session_id``, an earlier session of "my-ckpt-122" (the matrix's second
to last model, upstage/SOLAR-10.7B-v1.0), which is also what ``previous=["my-ckpt-122"]`` reads.
"""

import csv
import os
from pathlib import Path

from evalplan.client import EvalplanClient, EvalplanError, run_session

SCORES = Path(os.environ.get("EVALPLAN_DATA_DIR", "../shared/data")) / "openllm_v2_musr" / "scores.csv"
with SCORES.open(newline="") as file:
    header, *rows = csv.reader(file)
checkpoint_122, checkpoint_123 = ({item: float(v) for item, v in zip(header[1:], row[1:])} for row in rows[-2:])


def run_my_model(item: str) -> float:
    """The model's score on one item (0 or 1 on MuSR)."""
    return checkpoint_123[item]


setup = EvalplanClient(os.environ.get("EVALPLAN_URL", "http://127.0.0.1:8000"))
try:
    setup.get_benchmark("musr")
except EvalplanError as exc:
    if exc.status != 404:
        raise
    setup.create_benchmark("musr", capability="reasoning", score_kind="binary")
    setup.upload_scores("musr", "".join(",".join(row) + "\n" for row in [header, *rows[:-2]]))
previous_session_id = run_session(setup, "musr", "my-ckpt-122", checkpoint_122.__getitem__,
                                  stop={"half_width": 0.02}, max_items={"fraction": 0.15})["id"]

# ---- README.md "CI loop" shows the rest of this file ----
import os

from evalplan.client import EvalplanClient, run_session

client = EvalplanClient(os.environ.get("EVALPLAN_URL", "http://127.0.0.1:8000"))   # e.g. http://evalplan:8000
session = client.create_session("musr", "my-ckpt-123",                  # POST /v1/sessions
                                 stop={"half_width": 0.02},               # ±2 points at 95%
                                 max_items={"fraction": 0.15},            # at most 15% of the items
                                 previous=["my-ckpt-122"])                # earlier checkpoints warm the prior
while session["status"] != "stopped":
    for item in session["next_items"]:                                   # ask for the next item
        score = run_my_model(item)                                        # run the model on it
        session = client.observe(session["id"], item, score)             # post the score
print(session["estimate"], session["ci"], session["stop_reason"])        # precision|max_items|exhausted

# or all of the above in one call:
final = run_session(client, "musr", "my-ckpt-123", run_my_model, max_items=200)

# is the new checkpoint better than the previous one? (POST /v1/comparisons; level 0.95 unless asked)
paired = client.compare_sessions([previous_session_id, final["id"]])["pairs"][0]["paired"]
print(paired["mean_difference"], paired["interval"], paired["verdict"])   # b_better|a_better|undecided
