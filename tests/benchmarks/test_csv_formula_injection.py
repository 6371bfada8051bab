"""Issue 24 item 4: names that a spreadsheet would run as a formula come back neutralised in every
``text/csv`` export (OWASP "CSV injection": a cell starting with ``= + - @``, tab or CR gets a leading
single quote), and an export uploaded again gives back the original names."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from fastapi.testclient import TestClient

from evalplan.kit.csv_cells import neutralise, restore
from support.helpers import create_benchmark, upload_items, upload_score_cells, wait_for_job

DANGEROUS_MODELS = ['=HYPERLINK("http://evil")', "+cmd", "-x", "@SUM(1+1)"]
DANGEROUS_ITEMS = ["=1+1", "+2", "-3", "@A1"]  # a leading tab or CR is stripped from ids on input
SAFE = ["plain", "m'quote"]

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def test_neutralise_and_restore_are_inverse() -> None:
    for cell in ["=1", "+1", "-1", "@1", "\tx", "\rx", "'=already"]:
        assert neutralise(cell).startswith("'") and restore(neutralise(cell)) == cell
    for cell in ["plain", "m'quote", "'plain", "", "1.5"]:
        assert neutralise(cell) == cell and restore(cell) == cell


def _cells(text: str) -> list[str]:
    rows = list(csv.reader(io.StringIO(text, newline="")))
    return [cell for row in rows for cell in row]


@pytest.mark.slow
def test_score_and_coreset_csv_exports_neutralise_formula_cells(committed_client: TestClient) -> None:
    client = committed_client
    create_benchmark(client, "=evil-bench", score_kind="binary")
    items = DANGEROUS_ITEMS + [f"q{i}" for i in range(14)]
    upload_items(client, "=evil-bench", [{"id": i, "prompt": f"question {n}"} for n, i in enumerate(items)])
    models = DANGEROUS_MODELS + SAFE + [f"m{i}" for i in range(6)]
    rng = np.random.default_rng(1)
    cells = [{"model": m, "item": i, "score": float(rng.random() < 0.5)} for m in models for i in items]
    upload_score_cells(client, "=evil-bench", cells)

    text = client.get("/v1/benchmarks/=evil-bench/scores", headers={"Accept": "text/csv"}).text
    cells_out = _cells(text)
    bad = [c for c in cells_out if c.startswith(FORMULA_START)]
    assert not bad, bad
    for name in DANGEROUS_MODELS + DANGEROUS_ITEMS:
        assert "'" + name in cells_out, name
    assert "m'quote" in cells_out and "plain" in cells_out  # only formula starts are touched
    scores = [c for c in cells_out if c in ("0", "1")]
    assert len(scores) == len(models) * len(items)  # numbers stay numbers

    # the export, uploaded again to a new benchmark, gives back the original names
    create_benchmark(client, "roundtrip", score_kind="binary")
    r = client.post("/v1/benchmarks/roundtrip/scores", content=text.encode(), headers={"content-type": "text/csv"})
    assert r.status_code == 200, r.text
    back = client.get("/v1/benchmarks/roundtrip/scores", params={"format": "json", "limit": 1000}).json()["items"]
    assert {c["model"] for c in back} == set(models)
    assert {c["item"] for c in back} == set(items)

    bench_id = client.get("/v1/benchmarks/=evil-bench").json()["id"]
    r = client.post("/v1/coresets", json={"method": "random", "benchmarks": [bench_id], "budget": len(items)})
    assert r.status_code == 202, r.text
    assert wait_for_job(client, r.json()["job"]["id"])["status"] == "succeeded"
    export = client.get(f"/v1/coresets/{r.json()['coreset']['id']}/export", params={"format": "csv"})
    assert export.status_code == 200, export.text
    out = _cells(export.text)
    assert not [c for c in out if c.startswith(FORMULA_START)], out
    assert "'=evil-bench" in out and "'=1+1" in out and "'-3" in out
