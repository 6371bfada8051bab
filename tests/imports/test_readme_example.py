"""The README's files exist in a fresh clone and its lm-eval import example works as written."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
EXAMPLE = "examples/lm-eval/samples_arc_easy_2024-06-26T12-00-00.123456.jsonl"


def test_every_file_the_readme_posts_is_in_the_checkout() -> None:
    """``@examples/...`` arguments of its curl commands are shipped, the harness imports' logs included
    (``@../shared/data/...`` are the shared data sets next to the checkout)."""
    paths = re.findall(r"@(examples/[\w./-]+)", README)
    assert EXAMPLE in paths
    for path in paths:
        assert (ROOT / path).is_file(), f"README posts {path}, which a fresh clone does not have"


def test_readme_lm_eval_import_example(client: TestClient) -> None:
    path = ROOT / EXAMPLE
    r = client.post("/v1/imports/lm-eval", data={"model": "my-model"},
                    files=[("files", (path.name, path.read_bytes(), "application/x-ndjson"))])
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["model"] == "my-model" and body["items_created"] == 20 and body["n_scores"] == 20
    items = client.get("/v1/benchmarks/arc_easy/items").json()["items"]
    assert len(items) == 20 and all(i["prompt"] for i in items)  # the samples' text is stored
