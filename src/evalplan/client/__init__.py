"""The typed Python client of the Evalplan API, standard library only (no server dependencies).

``from evalplan.client import EvalplanClient, run_session``::

    client = EvalplanClient("http://evalplan:8000", token=None)  # token: $EVALPLAN_TOKEN by default
    final = run_session(client, "mmlu", "my-checkpoint-123", lambda item_id: run_my_model(item_id))
    print(final["estimate"], final["ci"])

The harness adapters (``evalplan.integrations.inspect``, ``evalplan run lm-eval``) use it.
"""

from evalplan.client.client import API_VERSION, EvalplanClient
from evalplan.client.loop import run_session
from evalplan.client.transport import EvalplanError

__all__ = ["API_VERSION", "EvalplanClient", "EvalplanError", "run_session"]
