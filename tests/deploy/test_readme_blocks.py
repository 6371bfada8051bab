"""Every fenced code block of README.md is run by a named test, or says here why not: a new block fails this
test until it is added to one of the tables below."""

from __future__ import annotations

import re

from support.helpers import ROOT
from support.readme import code_blocks, readme

#: (section, index of the block in it) -> the test that runs it
RUN_BY = {
    ("A first session", 0): "tests/deploy/test_readme_walkthrough.py::test_first_session_blocks_run_against_a_live_server",
    ("A first session", 1): "tests/deploy/test_readme_walkthrough.py::test_first_session_blocks_run_against_a_live_server",
    ("The whole loop, runnable", 0): "tests/deploy/test_readme_walkthrough.py::test_walkthrough_runs_against_a_live_server",
    ("CI loop", 0): "tests/deploy/test_readme_ci_loop.py::test_ci_loop_runs_against_a_live_server",
    ("CI loop", 1): "tests/deploy/test_readme_ci_loop.py::test_session_cli_runs_against_a_live_server",
    ("Use it from your harness", 0): "tests/deploy/test_readme_harness.py::test_import_examples_run_against_a_live_server",
    ("Use it from your harness", 1):
        "tests/deploy/test_readme_harness.py::test_inspect_session_example_runs_against_a_live_server",
    ("Use it from your harness", 2): "tests/deploy/test_readme_harness.py::test_lm_eval_lines_run_against_a_live_server",
    ("Production", 0): "tests/deploy/test_readme_production.py::test_production_block_runs_on_postgresql_and_redis",
}
#: (section, index) -> why no test runs it
NOT_RUN = {
    ("Two commands", 0): "`./dev.sh test` is the whole suite itself (CI's .ci/run runs it); `./dev.sh serve` first "
                         "pip-installs the [worker] extra into .venv when its stamp is missing. The command it then "
                         "runs, `evalplan serve` on the embedded defaults, is what support.helpers.embedded_server runs",
}


def readme_blocks() -> list[tuple[str, int]]:
    found = []
    for part in re.split(r"\n## ", readme())[1:]:
        title = part.split("\n", 1)[0]
        found += [(title, i) for i, _block in enumerate(code_blocks(part))]
    return found


def test_every_readme_block_is_run_by_a_test_or_says_why_not() -> None:
    assert not set(RUN_BY) & set(NOT_RUN)
    assert sorted(readme_blocks()) == sorted({**RUN_BY, **NOT_RUN}), "a README.md block without a test: add one"
    for node in RUN_BY.values():
        path, function = node.split("::")
        assert f"def {function}(" in (ROOT / path).read_text(encoding="utf-8"), node
