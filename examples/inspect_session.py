"""The README's inspect_ai session, runnable as it is and offline, against a running service (./dev.sh serve):

    python examples/inspect_session.py   # EVALPLAN_URL (default http://127.0.0.1:8000); the log goes to ./logs
                                         # (inspect's default; INSPECT_LOG_DIR to change it)

README.md shows this file from the marker line on (tests/deploy/test_readme_harness.py checks that, and runs it).
The setup above the marker stands in for yours: ``dataset`` (45 ``arith`` samples), ``model`` (inspect's
``mockllm``, answering 2i, wrongly when i % 3 == 0; its outputs carry ``usage``, so nothing downloads tokenizer
files; yours is a name such as "openai/gpt-4o"), ``url``, and the ``arith`` benchmark's reference scores: six
synthetic models (seeded), where yours would be earlier runs imported from their logs (POST /v1/imports/inspect).
"""

import os
import random

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate

from evalplan.client import EvalplanClient, EvalplanError

url = os.environ.get("EVALPLAN_URL", "http://127.0.0.1:8000")
dataset = [Sample(id=f"q{i}", input=f"What is {i} plus {i}?", target=str(2 * i)) for i in range(45)]


def answer(input, tools, tool_choice, config):  # noqa: A002 - mockllm's custom_outputs signature
    i = int(input[-1].text.split()[2])
    output = ModelOutput.from_content(model="mockllm", content=str(2 * i) if i % 3 else "no idea")
    output.usage = ModelUsage(input_tokens=6, output_tokens=1, total_tokens=7)
    return output


model = get_model("mockllm/model", custom_outputs=answer)
setup, rng = EvalplanClient(url), random.Random(7)
try:
    setup.get_benchmark("arith")
except EvalplanError as exc:
    if exc.status != 404:
        raise
    setup.create_benchmark("arith", capability="math", score_kind="binary")
setup.upload_scores("arith", [{"model": f"arith-ref-{m}", "item": sample.id, "score": float(rng.random() < m / 6)}
                              for m in range(1, 7) for sample in dataset])

# ---- README.md "Use it from your harness" shows the rest of this file ----
# inspect_ai (pip install '.[inspect]'): runs exactly the samples the session proposes, posts their
# scores, ends the task when the session stops; the log's eval.metadata["evalplan"] holds the result
from evalplan.integrations.inspect import evalplan_source

src = evalplan_source(dataset, url=url, benchmark="arith", target="my-ckpt", stop={"half_width": 0.03})
inspect_eval(Task(dataset=src, metadata=src.metadata, solver=generate(), scorer=match()), model=model)
