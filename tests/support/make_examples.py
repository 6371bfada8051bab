"""Regenerate the small harness logs under ``examples/`` that the README's import commands post
(tests/deploy/test_readme_harness.py runs them). Offline, on CPU, with the real harness packages:

* ``examples/inspect/<date>_arith_<id>.eval``: inspect_ai's ``mockllm`` model on 12 ``arith`` samples
  (:func:`support.harness_runs.inspect_log`; its outputs carry ``usage``, so nothing downloads tiktoken files);
* ``examples/lighteval/details_localarith_<date>.parquet``: lighteval's own ``EvaluationTracker`` on 10 local
  docs (:func:`support.harness_runs.lighteval_details`);
* ``examples/helm/per_instance_stats.json``, ``scenario_state.json``: the first 5 instances of the real HELM
  run in ``tests/support/data/helm/simple_mcqa`` (crfm-helm 0.5.16, written by its ``make.sh``), cut so that each
  file stays under 50 KB; the records are HELM's, unchanged.

    .venv/bin/python tests/support/make_examples.py

It replaces the files; the .eval and .parquet names carry the run's date, so update them in README.md and the
folders' README.md (tests/deploy/test_readme_harness.py fails while README.md names a file that is not there).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
HELM_RUN = ROOT / "tests" / "support" / "data" / "helm" / "simple_mcqa"
HELM_INSTANCES = 5


def main() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.harness_runs import inspect_log, lighteval_details

    with tempfile.TemporaryDirectory() as work:
        log = inspect_log(Path(work) / "inspect", n=12)
        target = EXAMPLES / "inspect"
        target.mkdir(exist_ok=True)
        for old in target.glob("*.eval"):
            old.unlink()
        shutil.copy(log, target / log.name)
        details, _results, _expected = lighteval_details(Path(work) / "lighteval", splits={"test": 10},
                                                         task="localarith")
        target = EXAMPLES / "lighteval"
        target.mkdir(exist_ok=True)
        for old in target.glob("*.parquet"):
            old.unlink()
        shutil.copy(details, target / details.name)

    rows = json.loads((HELM_RUN / "per_instance_stats.json").read_text())
    state = json.loads((HELM_RUN / "scenario_state.json").read_text())
    keep = [r["instance"]["id"] for r in state["request_states"]][:HELM_INSTANCES]
    state["request_states"] = [r for r in state["request_states"] if r["instance"]["id"] in keep]
    target = EXAMPLES / "helm"
    target.mkdir(exist_ok=True)
    (target / "per_instance_stats.json").write_text(
        json.dumps([r for r in rows if r["instance_id"] in keep], indent=2))
    (target / "scenario_state.json").write_text(json.dumps(state, indent=2))
    for path in sorted(EXAMPLES.glob("*/*")):
        if path.suffix in (".eval", ".parquet", ".json"):
            print(f"{path.relative_to(ROOT)}  {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
