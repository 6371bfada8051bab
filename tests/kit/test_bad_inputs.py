"""The bad-input list (issue 13, failures 6 and 7): ~190 hand-made hostile or malformed requests across
the routes. Each must answer 4xx ``application/problem+json`` saying what and where, never 5xx, and
leave every table exactly as it was (a full snapshot of all rows before and after).

The data (a benchmark with items and scores, a model, a session) is seeded once per backend and
committed; each case then runs on it. Job dispatch is refused (:class:`helpers.NoJobsDispatcher`), so a
bad input that started a job would fail here too.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from evalplan.db.models import Base
from evalplan.kit.db import make_session_factory
from evalplan.main import create_app
from evalplan.sessions import cache
from support.helpers import NDJSON, PROBLEM, NoJobsDispatcher, empty_all_tables, settings_for, wide_csv

BACKENDS = ["sqlite", "postgresql"]
B = "bench"
ITEMS = [f"i{k}" for k in range(8)]
MODELS = ["m0", "m1", "m2", "m3"]
NUL = "%00"
DEEP = "[" * 200 + "]" * 200
HUGE = str(2**70)


def _npy(shape: tuple[int, ...], dtype: str = "<f4", data: bytes | None = None, fortran: bool = False) -> bytes:
    header = {"descr": dtype, "fortran_order": fortran, "shape": shape}
    text = repr(header).encode()
    pad = 64 - (10 + len(text) + 1) % 64
    head = b"\x93NUMPY\x01\x00" + (len(text) + pad + 1).to_bytes(2, "little") + text + b" " * pad + b"\n"
    if data is None:
        data = np.zeros(int(np.prod(shape)) if all(s >= 0 for s in shape) and len(shape) else 1,
                        dtype=np.dtype(dtype) if dtype in ("<f4", "<f2") else np.float32).tobytes()[:4096]
    return head + data


def _cursor(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _raw_json(text: str) -> dict[str, Any]:
    return {"content": text.encode(), "headers": {"content-type": "application/json"}}


def _npy_upload(content: bytes, items: str | None = '["i0"]', model: str = "hs-model") -> dict[str, Any]:
    data: dict[str, str] = {"model": model}
    if items is not None:
        data["items"] = items
    return {"files": {"file": ("states.npy", content, "application/octet-stream")}, "data": data}


def _lm_eval(content: bytes, model: str = "lm-model", **fields: str) -> dict[str, Any]:
    return {"files": [("files", ("samples_task_2024-01-01T00-00-00.jsonl", content, "application/jsonl"))],
            "data": {"model": model, **fields}}


LM_LINE = {"doc_id": 0, "doc": {"question": "q"}, "target": "a", "arguments": [["q", "a"]], "resps": [["a"]],
           "filtered_resps": ["a"], "filter": "none", "metrics": ["acc"], "acc": 1.0}


def _cases() -> list[tuple[str, str, str, dict[str, Any]]]:
    cases: list[tuple[str, str, str, dict[str, Any]]] = []

    def add(name: str, method: str, url: str, **kwargs: Any) -> None:
        cases.append((name, method, url, kwargs))

    # -- NUL in every path parameter of every route
    templates = [
        ("GET", "/v1/benchmarks/{b}"), ("GET", "/v1/benchmarks/{b}/items"), ("GET", "/v1/benchmarks/{b}/scores"),
        ("GET", "/v1/benchmarks/{b}/stats"), ("GET", "/v1/benchmarks/{b}/hidden-states"),
        ("DELETE", "/v1/benchmarks/{b}/hidden-states/{b}"), ("GET", "/v1/models/{b}"), ("GET", "/v1/jobs/{b}"),
        ("POST", "/v1/jobs/{b}/cancel"), ("GET", "/v1/jobs/{b}/plot.svg"), ("GET", "/v1/coresets/{b}"),
        ("GET", "/v1/coresets/{b}/export"), ("GET", "/v1/coresets/{b}/plot.svg"), ("GET", "/v1/sessions/{b}"),
        ("GET", "/v1/sessions/{b}/trajectory"), ("GET", "/v1/sessions/{b}/observations"),
        ("GET", "/v1/sessions/{b}/plot.svg"), ("GET", "/v1/benchmark-selections/{b}"),
        ("POST", "/v1/benchmarks/{b}/items"), ("POST", "/v1/benchmarks/{b}/scores"),
    ]
    for method, template in templates:
        add(f"nul-path {method} {template}", method, template.format(b=NUL))
        add(f"nul-in-name {method} {template}", method, template.format(b=f"a{NUL}b"))
    add("nul-path session observations post", "POST", f"/v1/sessions/s{NUL}/observations",
        json={"item": "i0", "score": 1})
    add("nul-path coreset predict", "POST", f"/v1/coresets/c{NUL}/predict", json={"model": "m0"})
    add("nul-path selection predict", "POST", f"/v1/benchmark-selections/x{NUL}/predict", json={"scores": {}})

    # -- NUL, non-finite and oversize values in every query parameter
    queries = [
        ("/v1/benchmarks", ["capability", "cursor"]), (f"/v1/benchmarks/{B}/items", ["cursor"]),
        (f"/v1/benchmarks/{B}/scores", ["metric", "cursor"]), (f"/v1/benchmarks/{B}/stats", ["metric"]),
        ("/v1/models", ["family", "cursor"]), ("/v1/jobs", ["kind", "status", "cursor"]),
        ("/v1/coresets", ["name", "benchmark", "cursor"]), ("/v1/benchmark-similarity", ["benchmarks", "model"]),
        ("/v1/sessions", ["benchmark", "target", "status", "cursor"]),
    ]
    for url, params in queries:
        for param in params:
            add(f"nul-query {url}?{param}", "GET", f"{url}?{param}={NUL}")
    for url in ("/v1/benchmarks", "/v1/models", "/v1/jobs", "/v1/sessions", f"/v1/benchmarks/{B}/items"):
        for value in ("NaN", "Infinity", "-inf", "1e400", HUGE, "0", "-1", "100000", "true", "abc"):
            add(f"bad-limit {url} {value}", "GET", f"{url}?limit={value}")
    for label, raw in (("garbage", "not-a-cursor!!"), ("nan", _cursor(b"NaN")), ("deep", _cursor(DEEP.encode())),
                       ("huge", _cursor(HUGE.encode())), ("nul", _cursor(b'"\\u0000"')),
                       ("wrong-shape", _cursor(b'{"a": 1}'))):
        for url in ("/v1/benchmarks", "/v1/sessions", f"/v1/benchmarks/{B}/items", "/v1/models"):
            add(f"bad-cursor {label} {url}", "GET", f"{url}?cursor={raw}")
    add("stats unknown metric", "GET", f"/v1/benchmarks/{B}/stats?metric=no_such_metric")
    add("stats bad metric", "GET", f"/v1/benchmarks/{B}/stats?metric=a%20b")
    add("scores format bad", "GET", f"/v1/benchmarks/{B}/scores?format=xml")
    add("export format bad", "GET", "/v1/coresets/none/export?format=xml")

    # -- benchmarks: score bounds, names, types
    for field in ("score_min", "score_max"):
        for label, text in (("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e400", "1e400"),
                            ("true", "true"), ("string", '"0"'), ("huge", HUGE)):
            add(f"benchmark {field}={label}", "POST", "/v1/benchmarks", **_raw_json(f'{{"name": "nb", "{field}": {text}}}'))
    add("benchmark name NUL", "POST", "/v1/benchmarks", json={"name": "a\x00b"})
    add("benchmark capability NUL", "POST", "/v1/benchmarks", json={"name": "nb", "capability": "x\x00"})
    add("benchmark embedding_fields NUL", "POST", "/v1/benchmarks", json={"name": "nb", "embedding_fields": ["\x00"]})
    add("benchmark name surrogate", "POST", "/v1/benchmarks", **_raw_json('{"name": "a\\ud800"}'))
    add("benchmark key NUL", "POST", "/v1/benchmarks", **_raw_json('{"name": "nb", "\\u0000": 1}'))
    add("benchmark deep", "POST", "/v1/benchmarks", **_raw_json(f'{{"name": "nb", "capability": {DEEP}}}'))
    add("benchmark very deep", "POST", "/v1/benchmarks", **_raw_json("[" * 100000 + "]" * 100000))
    add("benchmark name number", "POST", "/v1/benchmarks", json={"name": 5})
    add("benchmark score_kind bad", "POST", "/v1/benchmarks", json={"name": "nb", "score_kind": "weird"})
    add("benchmark duplicate", "POST", "/v1/benchmarks", json={"name": B})
    add("benchmark malformed", "POST", "/v1/benchmarks", **_raw_json('{"name": "nb",'))
    add("benchmark array", "POST", "/v1/benchmarks", json=["nb"])
    add("benchmark text/plain", "POST", "/v1/benchmarks", content=b'{"name": "nb"}',
        headers={"content-type": "text/plain"})
    add("benchmark form", "POST", "/v1/benchmarks", data={"name": "nb"})
    add("benchmark empty body", "POST", "/v1/benchmarks", **_raw_json(""))
    add("benchmark extra field", "POST", "/v1/benchmarks", json={"name": "nb", "evil": 1})
    add("benchmark not utf-8", "POST", "/v1/benchmarks", content=b'{"name": "\xff\xfe"}',
        headers={"content-type": "application/json"})

    # -- models
    add("model name NUL", "POST", "/v1/models", json={"name": "m\x00"})
    add("model metadata NaN", "POST", "/v1/models", **_raw_json('{"name": "nm", "metadata": {"x": NaN}}'))
    add("model metadata huge int", "POST", "/v1/models", **_raw_json(f'{{"name": "nm", "metadata": {{"x": {HUGE}}}}}'))
    add("model metadata deep", "POST", "/v1/models", **_raw_json(f'{{"name": "nm", "metadata": {{"x": {DEEP}}}}}'))
    add("model metadata NUL value", "POST", "/v1/models", json={"name": "nm", "metadata": {"x": "\x00"}})
    add("model family NUL", "POST", "/v1/models", json={"name": "nm", "family": "\x00"})
    add("model duplicate", "POST", "/v1/models", json={"name": "m0"})

    # -- items
    items_url = f"/v1/benchmarks/{B}/items"
    for label, line in (("fields NaN", '{"id": "n1", "prompt": "p", "fields": {"x": NaN}}'),
                        ("fields Infinity", '{"id": "n1", "prompt": "p", "fields": {"x": Infinity}}'),
                        ("fields 1e400", '{"id": "n1", "prompt": "p", "fields": {"x": 1e400}}'),
                        ("fields huge", f'{{"id": "n1", "prompt": "p", "fields": {{"x": {HUGE}}}}}'),
                        ("fields deep", f'{{"id": "n1", "prompt": "p", "fields": {{"x": {DEEP}}}}}'),
                        ("fields NUL", '{"id": "n1", "prompt": "p", "fields": {"x": "\\u0000"}}'),
                        ("fields NUL key", '{"id": "n1", "prompt": "p", "fields": {"\\u0000": 1}}'),
                        ("prompt NUL", '{"id": "n1", "prompt": "a\\u0000b"}'),
                        ("prompt surrogate", '{"id": "n1", "prompt": "a\\udc00"}'),
                        ("id NUL", '{"id": "n\\u0000", "prompt": "p"}'),
                        ("target NUL", '{"id": "n1", "prompt": "p", "target": "\\u0000"}'),
                        ("not json", '{"id": "n1", "prompt": '),
                        ("no id", '{"prompt": "p"}'),
                        ("id bool", '{"id": true, "prompt": "p"}'),
                        ("array line", '["n1", "p"]')):
        add(f"items jsonl {label}", "POST", items_url, content=(line + "\n").encode(), headers=NDJSON)
    add("items json list NaN", "POST", items_url, **_raw_json('[{"id": "n1", "prompt": "p", "fields": {"x": NaN}}]'))
    add("items json list deep", "POST", items_url, **_raw_json(f'[{{"id": "n1", "fields": {DEEP}}}]'))
    add("items json list NUL", "POST", items_url, json=[{"id": "n1", "prompt": "\x00"}])
    add("items json object", "POST", items_url, json={"id": "n1"})
    add("items content-type image", "POST", items_url, content=b"\x89PNG", headers={"content-type": "image/png"})
    add("items no content-type", "POST", items_url, content=b'{"id": "n1"}\n', headers={"content-type": ""})
    add("items not utf-8", "POST", items_url, content=b'{"id": "\xff"}\n', headers=NDJSON)
    add("items unknown benchmark", "POST", "/v1/benchmarks/nope/items", content=b'{"id": "n1"}\n', headers=NDJSON)

    # -- scores
    scores_url = f"/v1/benchmarks/{B}/scores"
    csv = {"content-type": "text/csv"}
    for label, text in (("NUL model", "model,i0\nm\x00,1\n"), ("NUL item", "model,i\x00\nm0,1\n"),
                        ("nan", "model,i0\nm0,nan\n"), ("inf", "model,i0\nm0,inf\n"),
                        ("1e400", "model,i0\nm0,1e400\n"), ("huge", f"model,i0\nm0,{HUGE}\n"),
                        ("out of range", "model,i0\nm0,7\n"), ("word", "model,i0\nm0,yes\n"),
                        ("empty", ""), ("ragged", "model,i0,i1\nm0,1\n"),
                        ("duplicate item", "model,i0,i0\nm0,1,0\n"), ("duplicate model", "model,i0\nm0,1\nm0,0\n"),
                        ("no model column", "i0,i1\n1,0\n")):
        add(f"scores csv {label}", "POST", scores_url, content=text.encode(), headers=csv)
    add("scores csv binary", "POST", scores_url, content=bytes(range(256)) * 4, headers=csv)
    add("scores csv metric NUL", "POST", f"{scores_url}?metric={NUL}", content=b"model,i0\nm0,1\n", headers=csv)
    add("scores csv metric nan", "POST", f"{scores_url}?metric=NaN", content=b"model,i0\nm0,1\n", headers=csv)
    for label, text in (("NaN", '[{"model": "m0", "item": "i0", "score": NaN}]'),
                        ("Infinity", '[{"model": "m0", "item": "i0", "score": Infinity}]'),
                        ("1e400", '[{"model": "m0", "item": "i0", "score": 1e400}]'),
                        ("true", '[{"model": "m0", "item": "i0", "score": true}]'),
                        ("string", '[{"model": "m0", "item": "i0", "score": "1"}]'),
                        ("huge", f'[{{"model": "m0", "item": "i0", "score": {HUGE}}}]'),
                        ("NUL model", '[{"model": "m\\u0000", "item": "i0", "score": 1}]'),
                        ("deep", f'[{{"model": "m0", "item": "i0", "score": {DEEP}}}]'),
                        ("not a list", '{"model": "m0"}'), ("malformed", "[{")):
        add(f"scores json {label}", "POST", scores_url, **_raw_json(text))
    add("scores content-type xml", "POST", scores_url, content=b"<a/>", headers={"content-type": "application/xml"})

    # -- sessions: create
    def session_body(**extra: Any) -> dict[str, Any]:
        return {"benchmark": B, "target": "fresh-target", **extra}

    for label, extra in (("batch_size above items", {"batch_size": 9}), ("batch_size 1e9", {"batch_size": 10**9}),
                         ("batch_size bool", {"batch_size": True}), ("batch_size float", {"batch_size": 1.5}),
                         ("max_items bool", {"max_items": True}), ("max_items 1e9", {"max_items": 10**9}),
                         ("window 0", {"window": 0}), ("window huge", {"window": 2**62}),
                         ("seed negative", {"seed": -1}), ("seed 2^40", {"seed": 2**40}), ("seed bool", {"seed": False}),
                         ("epsilon1 bool", {"epsilon1": True}), ("epsilon1 negative", {"epsilon1": -1}),
                         ("hyperparameters bool", {"hyperparameters": {"alpha": True}}),
                         ("hyperparameters unknown", {"hyperparameters": {"zeta": 1.0}}),
                         ("method unknown", {"method": "magic"}), ("target NUL", {"target": "\x00"}),
                         ("targets duplicate", {"target": None, "targets": ["a", "a"]}),
                         ("n_latent huge", {"target": None, "targets": ["a", "b"], "n_latent": 10**7}),
                         ("references unknown", {"reference_models": ["nobody", "m1"]}),
                         ("references too few", {"reference_models": ["m1"]})):
        add(f"session create {label}", "POST", "/v1/sessions", json=session_body(**extra))
    for label, text in (("seed 2^70", f'{{"benchmark": "{B}", "target": "t", "seed": {HUGE}}}'),
                        ("epsilon1 NaN", f'{{"benchmark": "{B}", "target": "t", "epsilon1": NaN}}'),
                        ("epsilon2 Infinity", f'{{"benchmark": "{B}", "target": "t", "epsilon2": Infinity}}'),
                        ("epsilon2 1e400", f'{{"benchmark": "{B}", "target": "t", "epsilon2": 1e400}}'),
                        ("hyperparameters NaN", f'{{"benchmark": "{B}", "target": "t", '
                                                '"hyperparameters": {"alpha": NaN}}')):
        add(f"session create {label}", "POST", "/v1/sessions", **_raw_json(text))
    add("session unknown benchmark", "POST", "/v1/sessions", json={"benchmark": "nope", "target": "t"})

    # -- sessions: observations (the seeded session's id is substituted for {sid})
    obs = "/v1/sessions/{sid}/observations"
    for label, body in (("score bool", {"item": "i0", "score": True}), ("score string", {"item": "i0", "score": "1"}),
                        ("score out of range", {"item": "i0", "score": 5}), ("item unknown", {"item": "zz", "score": 1}),
                        ("item NUL", {"item": "\x00", "score": 1}), ("item bool", {"item": True, "score": 1}),
                        ("both forms", {"item": "i0", "score": 1, "observations": []}),
                        ("empty list", {"observations": []}),
                        ("list bad score", {"observations": [{"item": "i0", "score": None}]}),
                        ("target on single", {"item": "i0", "score": 1, "target": "x"}), ("empty object", {})):
        add(f"observation {label}", "POST", obs, json=body)
    for label, text in (("NaN", '{"item": "i0", "score": NaN}'), ("Infinity", '{"item": "i0", "score": Infinity}'),
                        ("-Infinity", '{"item": "i0", "score": -Infinity}'), ("1e400", '{"item": "i0", "score": 1e400}'),
                        ("huge int", f'{{"item": "i0", "score": {HUGE}}}'),
                        ("huge item", f'{{"item": {HUGE}, "score": 1}}'),
                        ("deep", f'{{"observations": {DEEP}}}'), ("malformed", '{"item": "i0", "score": 1')):
        add(f"observation {label}", "POST", obs, **_raw_json(text))
    add("observation too many", "POST", obs, json={"observations": [{"item": "i0", "score": 1}] * 10001})
    add("observation unknown session", "POST", "/v1/sessions/sess_nope/observations", json={"item": "i0", "score": 1})

    # -- coresets
    def coreset(**extra: Any) -> dict[str, Any]:
        return {"method": "random", "benchmarks": [B], "budget": 2, **extra}

    for label, extra in (("budget above items", {"budget": 9}), ("budget 1e9", {"budget": 10**9}),
                         ("budget bool", {"budget": True}), ("budget zero", {"budget": 0}),
                         ("budget fraction 2", {"budget": {"fraction": 2}}),
                         ("budget fraction bool", {"budget": {"fraction": True}}),
                         ("seed negative", {"seed": -1}), ("seed bool", {"seed": True}),
                         ("method unknown", {"method": "magic"}), ("method NUL", {"method": "\x00"}),
                         ("benchmarks empty", {"benchmarks": []}), ("benchmarks unknown", {"benchmarks": ["nope"]}),
                         ("params unknown", {"params": {"zeta": 1}}),
                         ("n_trials 1e9", {"method": "random_search", "params": {"n_trials": 10**9}}),
                         ("n_trials bool", {"method": "random_search", "params": {"n_trials": True}}),
                         ("embedding_model path", {"method": "facility_location", "embedding_model": "/etc/passwd"}),
                         ("embedding_model hub", {"embedding_model": "someone/some-model"}),
                         ("name NUL", {"name": "\x00"})):
        add(f"coreset {label}", "POST", "/v1/coresets", json=coreset(**extra))
    for label, text in (("seed 2^70", f'{{"method": "random", "benchmarks": ["{B}"], "budget": 2, "seed": {HUGE}}}'),
                        ("budget NaN", f'{{"method": "random", "benchmarks": ["{B}"], "budget": NaN}}'),
                        ("params NaN", f'{{"method": "random", "benchmarks": ["{B}"], "budget": 2, '
                                       '"params": {"x": NaN}}'),
                        ("params deep", f'{{"method": "random", "benchmarks": ["{B}"], "budget": 2, '
                                        f'"params": {{"x": {DEEP}}}}}')):
        add(f"coreset {label}", "POST", "/v1/coresets", **_raw_json(text))
    add("coreset predict NaN", "POST", "/v1/coresets/none/predict",
        **_raw_json('{"scores": [{"benchmark": "b", "item": "i", "score": NaN}]}'))
    add("coreset predict level 1", "POST", "/v1/coresets/none/predict", json={"model": "m0", "level": 1})

    # -- embeddings, similarity, benchmark selections, backtests
    add("embeddings path", "POST", "/v1/embeddings", json={"benchmarks": [B], "model": "/etc/passwd"})
    add("embeddings dir", "POST", "/v1/embeddings", json={"benchmarks": [B], "model": "/etc"})
    add("embeddings NUL", "POST", "/v1/embeddings", json={"benchmarks": [B], "model": "a\x00"})
    add("embeddings too many", "POST", "/v1/embeddings", json={"benchmarks": [B] * 1001})
    add("similarity unknown", "GET", "/v1/benchmark-similarity?benchmarks=nope,also-nope")
    for label, extra in (("k bool", {"k": True}), ("k huge", {"k": 10**9}), ("k zero", {"k": 0}),
                         ("method unknown", {"method": "magic", "k": 1}), ("seed negative", {"k": 1, "seed": -1})):
        add(f"benchmark-selection {label}", "POST", "/v1/benchmark-selections",
            json={"matrix": {"models": ["a", "b", "c"], "benchmarks": ["x", "y"], "values": [[1, 2], [3, 4], [5, 6]]},
                  **extra})
    add("benchmark-selection NaN", "POST", "/v1/benchmark-selections", **_raw_json(
        '{"k": 1, "matrix": {"models": ["a", "b", "c"], "benchmarks": ["x", "y"], '
        '"values": [[NaN, 2], [3, 4], [5, 6]]}}'))
    add("benchmark-selection ragged", "POST", "/v1/benchmark-selections",
        json={"k": 1, "matrix": {"models": ["a", "b"], "benchmarks": ["x", "y"], "values": [[1], [3, 4]]}})
    add("benchmark-selection predict NaN", "POST", "/v1/benchmark-selections/none/predict",
        **_raw_json('{"scores": {"x": NaN}}'))
    for label, extra in (("budgets NaN", None), ("budgets bool", {"budgets": [True]}),
                         ("budgets 2", {"budgets": [2.0]}), ("budgets many", {"budgets": [0.1] * 101}),
                         ("seeds bool", {"seeds": True}), ("seeds 1e9", {"seeds": 10**9}),
                         ("methods unknown", {"methods": ["magic"]}), ("level 1", {"level": 1}),
                         ("n_reference huge", {"n_reference": 10**9}),
                         ("params n_trials 1e9", {"methods": ["random_search"],
                                                  "params": {"random_search": {"n_trials": 10**9}}})):
        if extra is None:
            add(f"backtest {label}", "POST", "/v1/backtests",
                **_raw_json(f'{{"benchmarks": "{B}", "methods": ["random"], "budgets": [NaN]}}'))
        else:
            add(f"backtest {label}", "POST", "/v1/backtests", json={"benchmarks": B, "methods": ["random"], **extra})

    # -- hidden states (.npy / .npz)
    hs = f"/v1/benchmarks/{B}/hidden-states"
    for label, content in (("absurd shape", _npy((2**40, 2**40), data=b"\x00" * 16)),
                           ("absurd rows", _npy((2**62, 4), data=b"\x00" * 16)),
                           ("negative shape", _npy((-1, 4), data=b"\x00" * 16)),
                           ("3-D", _npy((1, 2, 2))), ("1-D", _npy((4,))), ("zero rows", _npy((0, 4), data=b"")),
                           ("float64", _npy((1, 4), "<f8", b"\x00" * 32)), ("object", _npy((1, 1), "|O", b"")),
                           ("int", _npy((1, 4), "<i4", b"\x00" * 16)),
                           ("fortran", _npy((1, 4), fortran=True)), ("truncated", _npy((1, 4), data=b"\x00" * 8)),
                           ("nan", _npy((1, 2), data=np.array([np.nan, 1], dtype="<f4").tobytes())),
                           ("not npy", b"hello world"), ("bad magic version", b"\x93NUMPY\x09\x00garbage"),
                           ("bad header", b"\x93NUMPY\x01\x00\x10\x00{'descr': 1}    \n")):
        add(f"hidden-states {label}", "POST", hs, **_npy_upload(content))
    good = _npy((1, 2), data=np.zeros(2, dtype="<f4").tobytes())
    for label, items in (("items NUL", '["i\\u0000"]'), ("items NaN", "[NaN]"), ("items deep", DEEP),
                         ("items not json", "[i0"), ("items bool", "[true]"), ("items count", '["i0", "i1"]'),
                         ("items unknown", '["zz"]'), ("items missing", None)):
        add(f"hidden-states {label}", "POST", hs, **_npy_upload(good, items=items))
    add("hidden-states model NUL", "POST", hs, **_npy_upload(good, model="m\x00"))
    add("hidden-states model raw NUL", "POST", hs, **_npy_upload(good, model="m\x00x"))
    add("hidden-states no file", "POST", hs, data={"model": "x"})
    add("hidden-states json body", "POST", hs, json={"model": "x"})
    npz = io.BytesIO()
    np.savez(npz, ids=np.array(["i0"]), states=np.zeros((1, 2, 2), dtype=np.float32))
    add("hidden-states npz 3-D", "POST", hs, **_npy_upload(npz.getvalue(), items=None))

    # -- lm-eval imports
    imp = "/v1/imports/lm-eval"
    for label, line in (("NaN metric", json.dumps(LM_LINE).replace("1.0", "NaN")),
                        ("NUL doc", json.dumps({**LM_LINE, "doc": {"question": "a\x00"}})),
                        ("huge doc_id", json.dumps(LM_LINE).replace('"doc_id": 0', f'"doc_id": {HUGE}')),
                        ("deep doc", json.dumps(LM_LINE).replace('{"question": "q"}', DEEP)),
                        ("not json", "{"), ("array", "[1]")):
        add(f"lm-eval {label}", "POST", imp, **_lm_eval((line + "\n").encode()))
    ok_line = (json.dumps(LM_LINE) + "\n").encode()
    add("lm-eval model NUL", "POST", imp, **_lm_eval(ok_line, model="m\x00"))
    add("lm-eval metric NUL", "POST", imp, **_lm_eval(ok_line, metric="a\x00"))
    add("lm-eval filter NUL", "POST", imp, **_lm_eval(ok_line, filter="a\x00"))
    add("lm-eval metric nan", "POST", imp, **_lm_eval(ok_line, metric="nan"))
    add("lm-eval no files", "POST", imp, data={"model": "x"})
    add("lm-eval urlencoded NUL", "POST", imp, data={"model": "x\x00"})

    # -- jobs
    add("job cancel unknown", "POST", "/v1/jobs/job_nope/cancel")
    add("jobs status bad", "GET", "/v1/jobs?status=weird")
    add("job plot bad format", "GET", "/v1/jobs/job_nope/plot.gif")
    return cases


CASES = _cases()


def snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (sorted), the state a refused request must not change."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for table in Base.metadata.sorted_tables:
            rows = conn.execute(select(table)).all()
            out[table.name] = sorted(tuple(repr(v) for v in row) for row in rows)
    return out


@pytest.fixture(scope="module", params=BACKENDS)
def seeded(request: pytest.FixtureRequest, engines: dict[str, Engine],
           database_urls: dict[str, str]) -> Iterator[tuple[TestClient, Engine, str]]:
    engine = engines[request.param]
    empty_all_tables(engine)
    factory = make_session_factory(engine)
    app = create_app(settings_for(database_urls[request.param]), session_factory=factory,
                     dispatcher=NoJobsDispatcher())
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.post("/v1/benchmarks", json={"name": B, "score_kind": "binary"}).status_code == 201
        lines = "".join(json.dumps({"id": i, "prompt": f"item {i}", "fields": {"k": n}}) + "\n"
                        for n, i in enumerate(ITEMS))
        assert client.post(f"/v1/benchmarks/{B}/items", content=lines.encode(), headers=NDJSON).status_code == 200
        values = (np.arange(len(MODELS))[:, None] + np.arange(len(ITEMS))[None, :]) % 2
        r = client.post(f"/v1/benchmarks/{B}/scores", content=wide_csv(values.astype(float), MODELS, ITEMS).encode(),
                        headers={"content-type": "text/csv"})
        assert r.status_code == 200, r.text
        r = client.post("/v1/sessions", json={"benchmark": B, "target": "tgt", "max_items": 6})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        r = client.post(f"/v1/sessions/{sid}/observations", json={"item": "i0", "score": 1})
        assert r.status_code == 200, r.text
        yield client, engine, sid
    empty_all_tables(engine)
    cache.clear_caches()


@pytest.mark.parametrize(("name", "method", "url", "kwargs"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_located_4xx_problem_and_changes_nothing(seeded, name: str, method: str, url: str,
                                                                kwargs: dict[str, Any]) -> None:
    client, engine, sid = seeded
    before = snapshot(engine)
    r = client.request(method, url.replace("{sid}", sid), **kwargs)
    assert 400 <= r.status_code < 500, f"{name}: {r.status_code} {r.text[:500]}"
    assert r.headers["content-type"].startswith(PROBLEM), (name, r.headers["content-type"], r.text[:200])
    body = r.json()
    assert body["status"] == r.status_code and body["title"] and body["detail"], body
    assert "Traceback" not in r.text and "/work/" not in r.text and "site-packages" not in r.text
    assert r.headers.get("connection", "").lower() != "close" or r.status_code == 413
    assert snapshot(engine) == before, f"{name} changed the stored data"


def test_the_list_is_long() -> None:
    assert len(CASES) >= 190, len(CASES)
