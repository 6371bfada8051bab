"""Round-trip every shared score matrix through the HTTP data API on PostgreSQL.

For each ``<data dir>/*/scores.csv``: create a benchmark, upload the wide CSV,
download it again, and compare (a) the bytes and (b) the parsed matrices cell by
cell, missing cells included. Writes a table into docs/RESULTS.md.

Usage: python -m bench.service.roundtrip_shared_data [--write docs/RESULTS.md]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import httpx

from bench.common.markdown_sections import write_section
from bench.common.server import data_dir, fresh_database, running_server
from evalplan.benchmarks.score_formats import parse_wide_csv
from evalplan.core.benchmarks.score_scale import ScoreScale


def scale_for(csv_bytes: bytes) -> dict:
    upload = parse_wide_csv(csv_bytes, ScoreScale("continuous", None, None))
    values = upload.values[~(upload.values != upload.values)]
    if set(values.tolist()) <= {0.0, 1.0}:
        return {"score_kind": "binary"}
    if values.min() >= 0 and values.max() <= 1:
        return {"score_kind": "continuous", "score_min": 0, "score_max": 1}
    return {"score_kind": "continuous", "score_min": None, "score_max": None}


def same_matrix(a: bytes, b: bytes) -> bool:
    scale = ScoreScale("continuous", None, None)
    x, y = parse_wide_csv(a, scale), parse_wide_csv(b, scale)
    if x.model_names != y.model_names or x.item_ids != y.item_ids or x.values.shape != y.values.shape:
        return False
    for u, v in zip(x.values.ravel().tolist(), y.values.ravel().tolist()):
        if not (u == v or (math.isnan(u) and math.isnan(v))):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    url = fresh_database("evalplan_roundtrip")
    rows = []
    with running_server(url) as (base, _), httpx.Client(base_url=base, timeout=300) as http:
        for path in sorted(data_dir().glob("*/scores.csv")):
            name = path.parent.name
            original = path.read_bytes()
            r = http.post("/v1/benchmarks", json={"name": name, **scale_for(original)})
            assert r.status_code == 201, r.text
            r = http.post(f"/v1/benchmarks/{name}/scores", content=original, headers={"content-type": "text/csv"})
            assert r.status_code == 200, r.text
            stored = r.json()
            back = http.get(f"/v1/benchmarks/{name}/scores", headers={"accept": "text/csv"}).content
            rows.append((name, stored["n_models"], stored["n_items"], stored["n_scores"],
                         back == original, same_matrix(original, back)))
            print(rows[-1], flush=True)
    lines = [
        "<!-- roundtrip: written by `python -m bench.service.roundtrip_shared_data --write docs/RESULTS.md` -->",
        "Every shared score matrix uploaded as wide CSV through HTTP (PostgreSQL), downloaded again and compared.",
        "",
        "| data set | models | items | stored scores | bytes identical | matrix identical (missing cells included) |",
        "|---|---|---|---|---|---|",
        *[f"| {n} | {m} | {i} | {s} | {'yes' if b else 'NO'} | {'yes' if v else 'NO'} |" for n, m, i, s, b, v in rows],
        "<!-- /roundtrip -->",
    ]
    table = "\n".join(lines)
    print(table)
    if args.write:
        write_section(args.write, table, "<!-- roundtrip", "<!-- /roundtrip -->")
    assert all(r[4] and r[5] for r in rows), "a matrix did not round-trip"


if __name__ == "__main__":
    main()
