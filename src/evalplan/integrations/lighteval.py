"""Read lighteval ``details_<task>_<date>.parquet`` files into a :class:`ParsedImport`.

lighteval's ``EvaluationTracker.save`` writes one parquet per task: a row per sample with the columns
``doc`` (its ``Doc``: ``id``, ``task_name``, ``query``, ``choices``, ``gold_index``, ...), ``model_response``
and ``metric`` (``{metric name: value}``). ``Doc.id`` is the row index *within its split* (lighteval sets
``doc.id = str(ix)`` per split), so ids repeat when a task evaluates several splits, and the file does not
record the split. The item id is therefore ``<split>/<doc.id>``: the split is the ``split`` field, or
read from the run's ``results_<date>.json`` (``config_tasks[task].evaluation_splits``; with several
splits, a new split starts where ``doc.id`` restarts, the order lighteval writes them in). The model's
response comes from ``model_response`` (:func:`lighteval_response`).
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

from evalplan.integrations.harness_records import (
    ParsedImport,
    ParsedItem,
    ParsedResponse,
    SkipLog,
    response_of,
    text_of,
)
from evalplan.kit.errors import InvalidInput, NotInstalled

HARNESS = "lighteval"
DETAILS_RE = re.compile(r"^details_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.parquet$")
RESULTS_RE = re.compile(r"^results_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.json$")


def _rows(name: str, content: bytes) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise NotInstalled("lighteval imports need pyarrow on the server: pip install 'evalplan[lighteval]'",
                           [{"field": "files", "detail": "pyarrow is not installed"}]) from None
    try:
        table = pq.read_table(io.BytesIO(content))
    except Exception as exc:  # pyarrow raises ArrowInvalid and OSError alike
        raise InvalidInput(f"{name!r} is not a parquet file: {exc}"[:400],
                           [{"file": name, "detail": str(exc)[:300]}]) from None
    missing = {"doc", "metric"} - set(table.column_names)
    if missing:
        raise InvalidInput(f"{name!r} is not a lighteval details file: no {sorted(missing)} column",
                           [{"file": name, "detail": f"columns are {table.column_names}"}])
    columns = ["doc", "metric"] + (["model_response"] if "model_response" in table.column_names else [])
    rows: list[dict[str, Any]] = table.select(columns).to_pylist()
    return rows


def lighteval_response(doc: dict[str, Any], response: Any) -> ParsedResponse | None:
    """The response of one sample from its ``ModelResponse``: the first generated ``text`` (``extra``: the
    ``text_post_processed`` answer when it differs, the ``reasoning``, ``n_samples``), or for a
    log-likelihood task (no text; one ``logprobs`` entry per choice) the choice with the highest
    log-probability (``extra``: ``choice``, ``logprobs``). None otherwise (no ``model_response`` column)."""
    if not isinstance(response, dict):
        return None
    texts = [t for t in response.get("text") or [] if isinstance(t, str)]
    if texts:
        post = [t for t in response.get("text_post_processed") or [] if isinstance(t, str)]
        reasonings = [r for r in response.get("reasonings") or [] if isinstance(r, str)]
        return response_of(texts[0], {"post_processed": post[0] if post and post[0] != texts[0] else None,
                                      "reasoning": reasonings[0] if reasonings else None,
                                      "n_samples": len(texts) if len(texts) > 1 else None})
    choices = doc.get("choices") or []
    logprobs = response.get("logprobs") or []
    if (choices and len(logprobs) == len(choices)
            and all(isinstance(v, int | float) and not isinstance(v, bool) and v == v for v in logprobs)):
        best = max(range(len(logprobs)), key=lambda i: logprobs[i])
        return response_of(str(choices[best]), {"kind": "loglikelihood", "choice": best,
                                                "logprobs": [float(v) for v in logprobs]})
    return None


def _splits_of(results: dict[str, Any] | None, task: str) -> list[str] | None:
    if not isinstance(results, dict):
        return None
    config = (results.get("config_tasks") or {}).get(task)
    splits = config.get("evaluation_splits") if isinstance(config, dict) else None
    return [str(s) for s in splits] if isinstance(splits, list) and splits else None


def parse_lighteval_details(files: list[tuple[str, bytes]], *, model: str | None = None,
                            benchmark: str | None = None, metric: str | None = None,
                            split: str | None = None) -> ParsedImport:
    """One task's details file (plus, optionally, the run's results JSON) into one import."""
    details: list[tuple[str, str, bytes]] = []
    results: dict[str, Any] | None = None
    for name, content in files:
        base = name.replace("\\", "/").rsplit("/", 1)[-1]
        if match := DETAILS_RE.match(base):
            details.append((name, match.group("task"), content))
        elif RESULTS_RE.match(base):
            try:
                results = json.loads(content)
            except ValueError as exc:
                raise InvalidInput(f"{name!r} is not JSON: {exc}", [{"file": name, "detail": str(exc)}]) from None
        else:
            raise InvalidInput(f"{name!r} is not a lighteval details or results file", [
                {"file": name, "detail": "expected details_<task>_<date>.parquet or results_<date>.json"}])
    if len(details) != 1:
        raise InvalidInput(f"a lighteval import takes one details_<task>_<date>.parquet file, got {len(details)}",
                           [{"field": "files", "detail": "one task per import"}])
    name, task, content = details[0]
    rows = _rows(name, content)
    if model is None and isinstance(results, dict):
        general = results.get("config_general") or {}
        model = general.get("model_name") if isinstance(general.get("model_name"), str) else None
    if model is None:
        raise InvalidInput("the model is unknown: set the `model` field or send the run's results_<date>.json",
                           [{"field": "model", "detail": "required without results_<date>.json"}])
    splits = [split] if split else _splits_of(results, task)
    if not splits:
        raise InvalidInput("the split is unknown (lighteval details do not record it): set the `split` field or "
                           "send the run's results_<date>.json", [{"field": "split", "detail": "required"}])
    available = list(dict.fromkeys(k for r in rows for k, v in (r.get("metric") or {}).items() if v is not None))
    chosen = metric or (available[0] if available else None)
    if chosen is None or chosen not in available:
        raise InvalidInput(f"{name!r} has no metric {chosen!r}; its metrics are {available}",
                           [{"file": name, "field": "metric", "detail": f"choose among {available}"}])
    skips = SkipLog()
    scores: dict[str, float] = {}
    items: dict[str, ParsedItem] = {}
    responses: dict[str, ParsedResponse] = {}
    order: list[str] = []
    split_index, last_id = 0, None
    for n, row in enumerate(rows):
        doc = row.get("doc") or {}
        doc_id = str(doc.get("id"))
        if last_id is not None and doc_id.isdigit() and last_id.isdigit() and int(doc_id) <= int(last_id):
            split_index += 1
            if split_index >= len(splits):
                raise InvalidInput(f"doc id {doc_id} repeats in {name!r} (row {n}) but the run names only "
                                   f"{len(splits)} split(s) {splits}",
                                   [{"file": name, "row": n, "detail": "repeated id"}])
        last_id = doc_id
        item = f"{splits[split_index]}/{doc_id}"
        value = (row.get("metric") or {}).get(chosen)
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)) or value != value:
            skips.add("sample", f"no numeric {chosen!r} value", item)
            continue
        if item in scores:
            raise InvalidInput(f"item {item!r} appears twice in {name!r}",
                               [{"file": name, "row": n, "detail": "duplicate"}])
        scores[item] = float(value)
        order.append(item)
        choices = doc.get("choices") or []
        gold = doc.get("gold_index")
        golds = gold if isinstance(gold, list) else [gold] if isinstance(gold, int) else []
        target = "\n".join(str(choices[g]) for g in golds if isinstance(g, int) and 0 <= g < len(choices))
        fields = {"choices": list(choices), "gold_index": gold} if choices else None
        items[item] = ParsedItem(text_of(doc.get("query")), target or None, fields)
        response = lighteval_response(doc, row.get("model_response"))
        if response is not None:
            responses[item] = response
    notes = [f"item ids are <split>/<doc.id> with splits {splits[:split_index + 1]}"]
    return ParsedImport(HARNESS, benchmark or task, chosen, {model: scores} if scores else {}, items,
                        skips.entries(), notes, 1, order, responses={model: responses} if responses else {})
