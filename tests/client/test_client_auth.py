"""Issue 12 §4 end to end: a real ``evalplan serve`` with ``EVALPLAN_AUTH=required``; the operator's
``evalplan admin create-team / create-token / delete-team`` on its database; ``EvalplanClient`` and the
``evalplan session`` CLI with ``token=`` / ``--token`` / ``$EVALPLAN_TOKEN``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_client import upload_benchmark

from evalplan.client import EvalplanClient, EvalplanError
from support.helpers import embedded_server

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "bootstrap-admin-token-for-the-client-test-0123456789"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, Any]]:
    auth = {"EVALPLAN_AUTH": "required", "EVALPLAN_ADMIN_TOKEN": ADMIN}
    env = {**os.environ, "EVALPLAN_DATABASE_URL": f"sqlite:///{tmp_path / 'evalplan.db'}", "HF_HUB_OFFLINE": "1",
           "EVALPLAN_LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT / "src"), **auth}
    for name in ("EVALPLAN_REDIS_URL", "EVALPLAN_TOKEN"):
        env.pop(name, None)
    with embedded_server(tmp_path, env=auth, token="") as probe:
        yield {"base": probe.base_url, "env": env, "cwd": tmp_path}


def cli(served: dict[str, Any], *args: str, token_env: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(served["env"])
    if token_env is not None:
        env["EVALPLAN_TOKEN"] = token_env
    return subprocess.run([sys.executable, "-m", "evalplan.cli", *args], cwd=served["cwd"], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_operator_cli_and_clients_carry_tokens(served: dict[str, Any]) -> None:
    base = served["base"]
    made = cli(served, "admin", "create-team", "ml-eval")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["name"] == "ml-eval"
    issued = cli(served, "admin", "create-token", "ml-eval", "--scopes", "read,write", "--name", "ci")
    assert issued.returncode == 0, issued.stderr
    token = json.loads(issued.stdout)
    assert token["token"].startswith("evp_") and token["scopes"] == ["read", "write"]

    # no token: 401 problem; the token as an argument, then from $EVALPLAN_TOKEN
    with pytest.raises(EvalplanError) as missing:
        EvalplanClient(base, token="").request("GET", "/v1/benchmarks")
    assert missing.value.status == 401
    client = EvalplanClient(base, token=token["token"])
    upload_benchmark(client, "ci-bench")
    assert client.get_benchmark("ci-bench")["team"] == "ml-eval"
    os.environ["EVALPLAN_TOKEN"] = token["token"]
    try:
        assert EvalplanClient(base).get_benchmark("ci-bench")["visibility"] == "private"
    finally:
        del os.environ["EVALPLAN_TOKEN"]

    # the session CLI: --token, and $EVALPLAN_TOKEN
    created = cli(served, "session", "--url", base, "--token", token["token"], "create", "--benchmark", "ci-bench",
                  "--target", "ckpt-9")
    assert created.returncode == 0, created.stderr
    session_id = json.loads(created.stdout)["id"]
    shown = cli(served, "session", "--url", base, "show", session_id, token_env=token["token"])
    assert shown.returncode == 0 and json.loads(shown.stdout)["id"] == session_id, shown.stderr
    refused = cli(served, "session", "--url", base, "show", session_id)
    assert refused.returncode != 0 and "401" in refused.stderr + refused.stdout

    # the operator deletes the team: its token answers 401 from then on
    admin = EvalplanClient(base, token=ADMIN)
    assert {t["name"] for t in admin.request("GET", "/v1/teams")["items"]} >= {"ml-eval", "local"}
    gone = cli(served, "admin", "delete-team", "ml-eval")
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["benchmarks"] == 1 and json.loads(gone.stdout)["sessions"] == 1
    with pytest.raises(EvalplanError) as revoked:
        client.get_benchmark("ci-bench")
    assert revoked.value.status == 401
    assert cli(served, "admin", "delete-team", "ml-eval").returncode == 1  # no such team now
