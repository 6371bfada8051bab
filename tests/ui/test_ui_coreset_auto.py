"""The coreset page of ``method: "auto"`` shows what auto chose on each benchmark and why: the choice, the rule,
the honest error and the inner CV table (issue 34: the page said "predictor auto, params {}")."""

from __future__ import annotations

import re

from support.ui_data import create_benchmark, create_coreset


def test_auto_coreset_page_shows_its_choice_and_cv_table(committed_client) -> None:
    http = committed_client
    create_benchmark(http, "autoquiz", capability="knowledge", n_models=16, n_items=40, seed=5, text=False)
    coreset = create_coreset(http, {"method": "auto", "benchmarks": ["autoquiz"], "budget": 8,
                                    "reference_models": "all",
                                    "params": {"selectors": ["random", "anchor_points"], "max_seconds": 60}})
    (auto,) = coreset["diagnostics"]["auto"].values()
    page = http.get(f"/ui/coresets/{coreset['id']}")
    assert page.status_code == 200, page.text[:500]
    text = page.text
    assert "What <code>auto</code> chose, and why" in text
    assert auto["choice"]["description"] in text
    table = re.search(r'<table class="auto-cv">.*?</table>', text, re.DOTALL)
    assert table is not None
    rows = re.findall(r"<tr[^>]*><td><code>([^<]+)</code>", table.group(0))
    assert rows == [r["label"] for r in auto["cv_table"]] and len(rows) >= 2
    chosen = re.findall(r'<tr class="chosen"><td><code>([^<]+)</code>', table.group(0))
    assert chosen == [auto["choice"]["label"]]
    assert f"{auto['cv_table'][0]['cv_rmse']:.3f}"[:4] in table.group(0)  # the CV RMSE column, as numbers
    assert f"auto, chose autoquiz: {auto['choice']['label']}" in text  # provenance says what, not "auto"
