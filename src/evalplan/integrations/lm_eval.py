"""Parse lm-evaluation-harness ``--log_samples`` files (``samples_<task>_<date>.jsonl``).

Pure: no database, no web. :func:`parse_samples` streams the lines once and keeps only
the items of the selected filter, so memory grows with the parsed items, not the file;
:func:`parse_logs` hands each file on as the :class:`~evalplan.integrations.harness_records.ParsedImport`
every harness import stores (``evalplan.imports.harness``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from evalplan.integrations.harness_records import ParsedImport, ParsedItem, ParsedResponse, response_of
from evalplan.kit import input_guard, upload_bounds
from evalplan.kit.errors import ErrorCollector, InvalidInput

TASK_FILENAME_RE = re.compile(
    r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)\.jsonl$"
)
"""``samples_<task>_<date>.jsonl``; ``<date>`` is ``datetime.isoformat()`` with ':' -> '-'."""

PROMPT_DOC_KEYS = ("prompt", "question", "query", "problem", "input", "text", "instruction")
"""Doc fields tried, in order, for the prompt when ``arguments`` is absent or unusable."""

DEFAULT_FILTER = "none"

HARNESS = "lm_eval"
"""The harness name of an lm-eval import: the ``source`` of its stored responses."""

MAX_TASK_NAME = 200
"""Longest task name: it becomes a benchmark name (``benchmarks.name`` is VARCHAR(200))."""

MAX_DOC_ID = 2**31 - 1
"""Largest ``doc_id``: it is stored as the item's ``source_index`` (a 32-bit INTEGER)."""


def task_from_filename(filename: str) -> str:
    """Return the task name of a ``samples_<task>_<date>.jsonl`` file name or path."""
    base = re.split(r"[\\/]", filename)[-1]
    match = TASK_FILENAME_RE.match(base)
    if match is None:
        detail = (
            f"file name {base!r} is not an lm-evaluation-harness samples log; "
            "expected samples_<task>_<YYYY-MM-DDTHH-MM-SS[.ffffff]>.jsonl"
        )
        raise InvalidInput(detail, [{"file": filename, "detail": detail}])
    task = match.group("task")
    if len(task) > MAX_TASK_NAME:
        detail = f"task name in {base!r} is {len(task)} characters long; at most {MAX_TASK_NAME} are allowed"
        raise InvalidInput(detail, [{"file": filename, "detail": detail}])
    return task


@dataclass
class LmEvalItem:
    """One document of a task: its prompt, target, dataset row, score and the model's response
    (:func:`response_from_record`; None when the line has none)."""

    doc_id: int
    prompt: str
    target: str
    fields: dict[str, Any]
    score: float
    response: ParsedResponse | None = None


@dataclass
class LmEvalTaskLog:
    """The items of one task log for one metric and one filter, sorted by ``doc_id``."""

    task: str
    filename: str
    metric: str
    filter: str
    items: list[LmEvalItem]
    all_binary: bool


def compact_json(value: Any) -> str:
    """Deterministic compact JSON used for non-string targets and doc fallbacks."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _prompt_from_arguments(arguments: Any) -> str | None:
    """The context of the first request, in the dict, list or plain-string form."""
    if isinstance(arguments, str):
        return arguments or None
    first: Any = None
    if isinstance(arguments, dict) and arguments:
        req = arguments.get("gen_args_0", next(iter(arguments.values())))
        if isinstance(req, dict):
            first = req.get("arg_0")
        elif isinstance(req, (list, str)):
            first = req
    elif isinstance(arguments, list) and arguments:
        first = arguments[0]
    if isinstance(first, list):
        first = first[0] if first else None
    return first if isinstance(first, str) and first else None


def _prompt_from_doc(doc: dict[str, Any]) -> str:
    for key in PROMPT_DOC_KEYS:
        value = doc.get(key)
        if isinstance(value, str) and value:
            return value
    return compact_json(doc)


def _requests(arguments: Any) -> list[list[Any]]:
    """Each request's arguments as a list (``[context, continuation]``, ``[context, generation kwargs]`` or
    ``[text]``), from the dict (``{"gen_args_0": {"arg_0": ..}}``) or list form."""
    if isinstance(arguments, dict):
        return [[req[k] for k in sorted(req, key=lambda k: int(k[4:]) if k[4:].isdigit() else 0)]
                if isinstance(req, dict) else [req] for req in arguments.values()]
    if isinstance(arguments, list):
        return [list(req) if isinstance(req, list | tuple) else [req] for req in arguments]
    return []


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _loglikelihood(resp: Any) -> float | None:
    """A loglikelihood request's filtered response: ``[ll, is_greedy]`` (or ``ll``), possibly stringified."""
    if isinstance(resp, list | tuple) and resp:
        return _number(resp[0])
    return _number(resp)


def response_from_record(record: dict[str, Any], filter_name: str) -> ParsedResponse | None:
    """What the model answered on this line, from ``resps`` / ``filtered_resps`` and ``arguments``.

    * generation (``generate_until``: a request's second argument is its generation kwargs, or the
      responses are text): the first raw generation, ``resps[0][0]``; ``extra.filtered`` is the filtered
      answer (``filtered_resps[0]``) when it differs, ``extra.n_generations`` the number of samples;
    * log-likelihood (``multiple_choice``, ``loglikelihood``: one ``[ll, is_greedy]`` per request): the
      continuation with the highest log-likelihood (the choice ``acc`` scores), with ``extra.choice`` (its
      index) and ``extra.loglikelihoods``;
    * otherwise None: one ``loglikelihood`` request scores a given continuation (lambada), a
      ``loglikelihood_rolling`` one is a perplexity: neither is an answer of the model's own.
    """
    resps, filtered = record.get("resps"), record.get("filtered_resps")
    if not isinstance(filtered, list) or not filtered:
        return None
    requests = _requests(record.get("arguments"))
    second = [req[1] if len(req) > 1 else None for req in requests]
    generation = (any(isinstance(a, dict) for a in second) if requests
                  else all(isinstance(f, str) and _number(f) is None for f in filtered))
    if generation:
        raw = resps[0] if isinstance(resps, list) and resps else None
        samples = raw if isinstance(raw, list) else [raw] if raw is not None else []
        first = samples[0] if samples and isinstance(samples[0], str) else None
        answer = filtered[0] if isinstance(filtered[0], str) else compact_json(filtered[0])
        if first is None:
            return response_of(answer, {"filter": filter_name})
        return response_of(first, {"filter": filter_name, "filtered": answer if answer != first else None,
                                   "n_generations": len(samples) if len(samples) > 1 else None})
    if len(requests) < 2 or len(requests) != len(filtered) or not all(isinstance(a, str) for a in second):
        return None  # one scored continuation, a rolling log-likelihood, an unknown request type: no answer
    lls = [_loglikelihood(f) for f in filtered]
    if any(ll is None for ll in lls):
        return None
    values = [float(ll) for ll in lls if ll is not None]
    best = max(range(len(values)), key=lambda i: values[i])
    return response_of(str(second[best]), {"filter": filter_name, "kind": "loglikelihood", "choice": best,
                                           "loglikelihoods": values})


def _target_text(target: Any) -> str:
    if target is None:
        return ""
    if isinstance(target, (list, dict)):
        return compact_json(target)
    return str(target)


def _score(value: Any) -> float | str:
    """The score as a float, or a message saying why it is not one."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        score = float(value)
        if not math.isfinite(score):
            return f"score must be a finite number, got {value!r}"
        return score
    return f"score must be a number or boolean, got {type(value).__name__} {_short(value)}"


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class _Bucket:
    """Items and located errors of one filter while the default filter is undecided."""

    items: list[LmEvalItem] = field(default_factory=list)
    first_row: dict[int, int] = field(default_factory=dict)
    errors: ErrorCollector = field(default_factory=ErrorCollector)


def parse_samples(
    filename: str,
    lines: Iterable[bytes | str],
    metric: str | None = None,
    filter: str | None = None,  # noqa: A002 - mirrors the harness field name
) -> LmEvalTaskLog:
    """Parse one samples log into the items of one metric and filter.

    ``metric`` defaults to the first of the first record's ``metrics``; ``filter`` to
    ``"none"`` when the file has it, else the first filter seen. Errors are collected
    with their 1-based line number and field, then raised together as ``InvalidInput``.
    """
    task = task_from_filename(filename)
    errors = ErrorCollector()
    buckets: dict[str, _Bucket] = {}
    filters_seen: dict[str, None] = {}
    metrics_seen: dict[str, None] = {}
    chosen_metric = metric
    n_records = 0

    for row, raw in enumerate(lines, start=1):
        if isinstance(raw, (bytes, bytearray)):
            try:
                text = bytes(raw).decode("utf-8")
            except UnicodeDecodeError as exc:
                errors.add(f"invalid UTF-8: {exc}", row=row, column=None)
                continue
        else:
            text = raw
        if row == 1:
            text = text.lstrip("\ufeff")
        text = text.strip()
        if not text:
            continue
        upload_bounds.check_line(text, row)  # 413 before a huge line is built (issue 32 item 2)
        try:
            record = input_guard.loads(text, where=f"line {row}", finite=False)
        except json.JSONDecodeError as exc:
            errors.add(f"invalid JSON: {exc}", row=row, column=None)
            continue
        except input_guard.InputRejected as exc:
            errors.add(exc.errors[0]["detail"], row=row, column=exc.errors[0]["field"])
            continue
        if not isinstance(record, dict):
            errors.add(
                f"expected a JSON object, got {type(record).__name__}", row=row, column=None
            )
            continue
        n_records += 1

        ok = True
        raw_doc_id = record.get("doc_id")
        doc_id = raw_doc_id if isinstance(raw_doc_id, int) and not isinstance(raw_doc_id, bool) else -1
        if not 0 <= doc_id <= MAX_DOC_ID:
            errors.add(
                f"doc_id must be an integer from 0 to {MAX_DOC_ID}, got {_short(raw_doc_id)}",
                row=row,
                column="doc_id",
            )
            ok = False
        metrics = record.get("metrics")
        if (
            not isinstance(metrics, list)
            or not metrics
            or not all(isinstance(m, str) for m in metrics)
        ):
            errors.add(
                f"metrics must be a non-empty list of metric names, got {_short(metrics)}",
                row=row,
                column="metrics",
            )
            ok = False
        else:
            for name in metrics:
                metrics_seen.setdefault(name, None)
            if chosen_metric is None:
                chosen_metric = metrics[0]
        line_filter = record.get("filter", DEFAULT_FILTER)
        if not isinstance(line_filter, str) or not line_filter:
            errors.add(
                f"filter must be a non-empty string, got {_short(line_filter)}",
                row=row,
                column="filter",
            )
            continue
        filters_seen.setdefault(line_filter, None)
        doc = record.get("doc", {})
        if not isinstance(doc, dict):
            errors.add(f"doc must be a JSON object, got {_short(doc)}", row=row, column="doc")
            ok = False
        else:
            try:  # the doc becomes the item's fields: finite numbers only
                input_guard.check_json_value(doc, where=f"line {row}", prefix=("doc",))
            except input_guard.InputRejected as exc:
                errors.add(exc.errors[0]["detail"], row=row, column=exc.errors[0]["field"])
                ok = False

        # Keep only the filter that can still be chosen: the explicit one, else "none"
        # or (until "none" shows up) the first filter seen.
        if filter is not None:
            keep = line_filter == filter
        else:
            keep = line_filter == DEFAULT_FILTER or (
                DEFAULT_FILTER not in filters_seen and line_filter == next(iter(filters_seen))
            )
            if line_filter == DEFAULT_FILTER:
                for other in [f for f in buckets if f != DEFAULT_FILTER]:
                    del buckets[other]
        if not keep:
            continue
        bucket = buckets.setdefault(line_filter, _Bucket())

        if ok and doc_id in bucket.first_row:
            bucket.errors.add(
                f"duplicate doc_id {doc_id} for filter {line_filter!r} "
                f"(first at row {bucket.first_row[doc_id]})",
                row=row,
                column="doc_id",
            )
            ok = False
        elif ok:
            bucket.first_row[doc_id] = row
        if chosen_metric is None:
            continue  # this line's metrics are invalid and already reported
        if chosen_metric not in record:
            bucket.errors.add(
                f"missing the value of metric {chosen_metric!r}", row=row, column=chosen_metric
            )
            continue
        score = _score(record[chosen_metric])
        if isinstance(score, str):
            bucket.errors.add(score, row=row, column=chosen_metric)
            continue
        if not ok:
            continue
        prompt = _prompt_from_arguments(record.get("arguments"))
        bucket.items.append(
            LmEvalItem(
                doc_id=doc_id,
                prompt=prompt if prompt is not None else _prompt_from_doc(doc),
                target=_target_text(record.get("target")),
                fields=doc,
                score=score,
                response=response_from_record(record, line_filter),
            )
        )

    summary = f"invalid lm-evaluation-harness samples log {filename!r}"
    if n_records == 0:
        errors.raise_if_any(summary)
        detail = f"{filename!r} contains no records"
        raise InvalidInput(detail, [{"file": filename, "detail": detail}])

    if filter is not None:
        chosen_filter: str | None = filter
        if filters_seen and filter not in filters_seen:
            detail = (
                f"filter {filter!r} not found in {filename!r}; "
                f"available filters: {', '.join(filters_seen)}"
            )
            raise InvalidInput(detail, [{"file": filename, "column": "filter", "detail": detail}])
    else:
        chosen_filter = (
            DEFAULT_FILTER if DEFAULT_FILTER in filters_seen else next(iter(filters_seen), None)
        )
    if metric is not None and metrics_seen and metric not in metrics_seen:
        detail = (
            f"metric {metric!r} not found in {filename!r}; "
            f"available metrics: {', '.join(metrics_seen)}"
        )
        raise InvalidInput(detail, [{"file": filename, "column": "metrics", "detail": detail}])

    chosen = buckets.get(chosen_filter) if chosen_filter is not None else None
    all_errors = errors.errors + (chosen.errors.errors if chosen is not None else [])
    all_errors.sort(key=lambda e: e.get("row") or 0)
    final = ErrorCollector()
    for err in all_errors:
        final.add(**err)
    final.raise_if_any(summary)
    if chosen is None or not chosen.items or chosen_filter is None or chosen_metric is None:
        # Unreachable when no error was collected; kept as a guard, not an assert.
        detail = f"{filename!r} has no usable records for filter {chosen_filter!r}"
        raise InvalidInput(detail, [{"file": filename, "detail": detail}])

    items = sorted(chosen.items, key=lambda item: item.doc_id)
    return LmEvalTaskLog(
        task=task,
        filename=filename,
        metric=chosen_metric,
        filter=chosen_filter,
        items=items,
        all_binary=all(item.score in (0.0, 1.0) for item in items),
    )


def as_parsed_import(log: LmEvalTaskLog, model: str) -> ParsedImport:
    """``log`` as the record every harness import stores: benchmark = task, item id = ``str(doc_id)`` (its
    ``source_index`` the ``doc_id``), one model's scores; errors about a score name the file, ``doc_id`` and
    metric column."""
    items = {str(item.doc_id): ParsedItem(item.prompt, item.target, item.fields, source_index=item.doc_id)
             for item in log.items}
    return ParsedImport(
        harness=HARNESS, benchmark=log.task, metric=log.metric,
        scores={model: {str(item.doc_id): item.score for item in log.items}}, items=items,
        item_order=list(items),
        responses={model: {str(item.doc_id): item.response for item in log.items if item.response}},
        description=f"Imported from lm-evaluation-harness log {log.filename}", source=log.filename,
        locate=lambda _model, item: {"file": log.filename, "doc_id": int(item), "column": log.metric},
        filter=log.filter,
    )


def parse_logs(files: Iterable[tuple[str, Iterable[bytes | str]]], *, model: str, metric: str | None,
               filter: str | None) -> Iterator[ParsedImport]:  # noqa: A002 - mirrors the harness field name
    """Each file (``(name, lines)``, one task per file) parsed by :func:`parse_samples` and converted by
    :func:`as_parsed_import`, one at a time (a caller checks each before the next is read); 422 when a task
    appears in two files or there are no files."""
    seen: dict[str, str] = {}
    for filename, lines in files:
        log = parse_samples(filename, lines, metric=metric, filter=filter)
        if log.task in seen:
            raise InvalidInput(f"task {log.task!r} appears in two files",
                               [{"file": filename, "detail": f"also in {seen[log.task]}"}])
        seen[log.task] = filename
        yield as_parsed_import(log, model)
    if not seen:
        raise InvalidInput("no files to import", [{"field": "files",
                                                   "detail": "at least one samples_<task>_<date>.jsonl"}])
