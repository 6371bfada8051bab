"""The README's runnable walkthrough (examples/walkthrough.sh, shown verbatim in README.md) against a live
embedded server on the shared data: a score-based coreset and its prediction, a backtest, a plan, a session."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from support.helpers import ROOT, embedded_server
from support.readme import DATA, code_blocks, documents, fresh_shell_env, section

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "examples" / "walkthrough.sh"


def test_readme_shows_the_walkthrough_verbatim() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- walkthrough -->\n```bash\n(.*?)```\n<!-- /walkthrough -->", readme, re.S)
    assert block, "README.md must show examples/walkthrough.sh between <!-- walkthrough --> markers"
    body = SCRIPT.read_text(encoding="utf-8").split("set -euo pipefail\n", 1)[1]
    assert block.group(1) == body


def test_walkthrough_runs_against_a_live_server(tmp_path: Path) -> None:
    assert (DATA / "helm_lite_math" / "scores.csv").is_file(), f"the shared data is missing at {DATA}"
    with embedded_server(tmp_path, env={"EVALPLAN_DATA_DIR": str(DATA)}) as client:
        out = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=1200,
                             env=fresh_shell_env(EVALPLAN_URL=client.base_url, EVALPLAN_DATA_DIR=str(DATA)))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert '"n_items":437' in out.stdout.replace(" ", "")  # the upload of 82 reference models
    assert '"estimate"' in lines[2] and '"interval"' in lines[2]  # the coreset's prediction
    assert sum(line.startswith(("random ", "mrmr ")) for line in lines) == 4  # backtest rows: 2 methods x 2 seeds
    method, n, estimate, *_rest = lines[-1].split(" ")
    assert method == "active_design" and int(n) > 0 and 0.0 <= float(estimate) <= 1.0
    assert lines[-1].endswith(("precision", "max_items", "exhausted")), lines[-1]


def first_session_blocks() -> list[str]:
    """The bash blocks of the README's "A first session" section, verbatim."""
    return [text for language, text in code_blocks(section("A first session")) if language == "bash"]


def test_first_session_blocks_run_against_a_live_server(tmp_path: Path) -> None:
    """Every command of both blocks, as written, from a checkout next to ``shared/data``; curl fails on any
    4xx/5xx (``-f``), the shell on any failed command."""
    blocks = first_session_blocks()
    assert len(blocks) == 2, "README.md's 'A first session' shows two bash blocks"
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(DATA.resolve())
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "server").mkdir()
    failing_curl = 'set -euo pipefail\ncurl() { command curl -sSf "$@"; }\n'
    with embedded_server(tmp_path / "server") as client:
        runs = [subprocess.run(["bash", "-c", failing_curl + block], cwd=tmp_path / "checkout", capture_output=True,
                               text=True, timeout=900, env=fresh_shell_env(EVALPLAN_URL=client.base_url))
                for block in blocks]
    for out in runs:
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    first, text = (documents(out.stdout) for out in runs)
    assert [d.get("name") for d in first[:1]] == ["musr"] and "n_models" in first[1], first[:2]
    header = (tmp_path / "checkout" / "musr.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert len(header) == 1 + 756  # the model column and MuSR's 756 items
    assert "my-model" in json.dumps(first[-1]), first[-1]  # the lm-eval import's answer
    export, coreset, prediction = text[-3:]
    assert len(export["gsm8k"]) == 50 and len(coreset["items"]) == 50
    assert 0.0 <= prediction["benchmarks"]["gsm8k"]["estimate"] <= 1.0
