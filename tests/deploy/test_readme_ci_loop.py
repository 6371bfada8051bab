"""The README's "CI loop" against a live embedded server on the shared data (MuSR): examples/ci_loop.py (the
client's observe loop, ``run_session``, ``compare_sessions``) and examples/session_cli.sh (the same session from
a shell with ``evalplan session create / observe / show``), each shown verbatim in README.md."""

from __future__ import annotations

import csv
import json
import subprocess
from collections.abc import Iterator

import pytest

from evalplan.client import EvalplanClient
from support.helpers import ROOT, embedded_server
from support.readme import DATA, example_body, fresh_shell_env, section, shown_examples

pytestmark = pytest.mark.slow

EXAMPLES = ("examples/ci_loop.py", "examples/session_cli.sh")


@pytest.mark.parametrize("path", EXAMPLES)
def test_readme_shows_the_example_verbatim(path: str) -> None:
    shown = shown_examples(section("CI loop"))
    assert path in shown, f"README.md's CI loop must show {path} between <!-- example: {path} --> markers"
    assert shown[path] == example_body(path)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvalplanClient]:
    assert (DATA / "openllm_v2_musr" / "scores.csv").is_file(), f"the shared data is missing at {DATA}"
    with embedded_server(tmp_path_factory.mktemp("server"), env={"EVALPLAN_DATA_DIR": str(DATA)}) as client:
        yield client


@pytest.fixture(scope="module")
def ci_loop(server: EvalplanClient) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """``python examples/ci_loop.py`` from the checkout (its setup uploads MuSR's references to the fresh server),
    and the MuSR sessions right after it."""
    out = subprocess.run(["./dev.sh", "run", "python", "examples/ci_loop.py"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300,
                         env=fresh_shell_env(EVALPLAN_URL=server.base_url, EVALPLAN_DATA_DIR=str(DATA)))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out, server.list_sessions(benchmark="musr", limit=50)["items"]


def test_ci_loop_runs_against_a_live_server(server: EvalplanClient,
                                            ci_loop: tuple[subprocess.CompletedProcess[str], list[dict]]) -> None:
    out, sessions = ci_loop
    first, second = out.stdout.strip().splitlines()
    estimate, rest = first.split(" ", 1)  # print(session["estimate"], session["ci"], session["stop_reason"])
    ci, stop_reason = rest.rsplit(" ", 1)
    low, high = json.loads(ci)
    assert 0.0 <= low <= float(estimate) <= high <= 1.0 and stop_reason in ("precision", "max_items", "exhausted")
    assert second.split()[-1] in ("b_better", "a_better", "undecided")
    benchmark = server.get_benchmark("musr")
    assert (benchmark["n_models"], benchmark["n_items"]) == (427, 756)  # the matrix but the two checkpoints
    by_target: dict[str, list[dict]] = {}
    for s in sessions:
        by_target.setdefault(s["target"], []).append(s)
    # the earlier checkpoint's session (setup), the observe loop, run_session's
    assert sorted((t, len(v)) for t, v in by_target.items()) == [("my-ckpt-122", 1), ("my-ckpt-123", 2)]
    assert all(s["status"] == "stopped" for s in sessions)
    assert [s["previous"] for s in by_target["my-ckpt-123"] if s["n_observed"] == 114] == [["my-ckpt-122"]]
    assert any(s["n_observed"] == 114 and s["stop_reason"] == "max_items" for s in by_target["my-ckpt-123"])  # 15%


def test_session_cli_runs_against_a_live_server(server: EvalplanClient,
                                                ci_loop: tuple[subprocess.CompletedProcess[str], list[dict]]) -> None:
    """After the CI loop (MuSR's references and my-ckpt-122's observations are on the server), as a user would."""
    out = subprocess.run(["./dev.sh", "run", "bash", "examples/session_cli.sh"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300,
                         env=fresh_shell_env(EVALPLAN_URL=server.base_url, EVALPLAN_DATA_DIR=str(DATA)))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    shown = json.loads(out.stdout)  # `evalplan session show` prints the session
    assert shown["target"] == "my-ckpt-123" and shown["status"] == "stopped"
    assert shown["n_observed"] == 5 and shown["stop_reason"] == "max_items" and shown["previous"] == ["my-ckpt-122"]
    assert server.get_session(shown["id"]) == shown
    rows = list(csv.reader((DATA / "openllm_v2_musr" / "scores.csv").open(newline="")))
    truth = dict(zip(rows[0], rows[-1]))  # the matrix's last model plays my-ckpt-123
    posted = server.observations(shown["id"], limit=10)["items"]
    assert len(posted) == 5 and all(o["score"] == float(truth[o["item"]]) for o in posted)
