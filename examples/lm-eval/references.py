"""The reference scores that the README's `evalplan run lm-eval` lines need, for the local 24-doc task
``evalplan_arith`` (tasks/evalplan_arith.jsonl), and an 8-item coreset on them; prints the coreset's id.

    ./dev.sh run python examples/lm-eval/references.py      # EVALPLAN_URL, default http://127.0.0.1:8000

In practice the references are real models' results, imported from their own lm-eval logs
(``POST /v1/imports/lm-eval -F model=NAME -F files=@samples_evalplan_arith_*.jsonl``). Here six example
reference models of graded ability stand in for them (``arith-ref-1`` answers 1 doc in 6 right, ...,
``arith-ref-6`` all of them), so the lines run offline in seconds. Safe to run twice: an existing benchmark
keeps its scores, and a new coreset is made each time.
"""

import json
import os
from pathlib import Path

from evalplan.client import EvalplanClient, EvalplanError

TASK = Path(__file__).with_name("tasks") / "evalplan_arith.jsonl"
docs = [json.loads(line) for line in TASK.read_text().splitlines() if line.strip()]

client = EvalplanClient(os.environ.get("EVALPLAN_URL", "http://127.0.0.1:8000"))
try:
    client.get_benchmark("evalplan_arith")
except EvalplanError as exc:
    if exc.status != 404:
        raise
    client.create_benchmark("evalplan_arith", score_kind="binary")
    # lm-eval's doc index is the item id the `evalplan run lm-eval` adapter posts
    client.upload_items("evalplan_arith", [{"id": str(i), "prompt": doc["question"]} for i, doc in enumerate(docs)])
    client.upload_scores("evalplan_arith", [{"model": f"arith-ref-{m}", "item": str(i),
                                             "score": float((i * 7 + m) % 6 < m)}
                                            for m in range(1, 7) for i in range(len(docs))])
made = client.create_coreset("random", ["evalplan_arith"], 8, reference_models="all", seed=1)
client.wait_job(made["job"]["id"], timeout=120)
print(made["coreset"]["id"])
