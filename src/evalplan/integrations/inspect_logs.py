"""Read inspect_ai evaluation logs (``.eval`` zips and the older ``.json`` logs) into a :class:`ParsedImport`.

The logs are read with inspect_ai's own reader (``inspect_ai.log.read_eval_log``): ``.eval`` members may be
compressed in ways the standard library cannot read. Sample ``id`` -> item id; score = inspect's
``value_to_float()`` of the chosen scorer's value; several epochs of a sample average. The model's response
is the sample's ``output.completion`` of its first epoch (:func:`sample_response`).
"""

from __future__ import annotations

import io
from typing import Any

from evalplan.integrations.harness_records import (
    MAX_EXTRA_STRING,
    ParsedImport,
    ParsedItem,
    ParsedResponse,
    SkipLog,
    mean,
    response_of,
    text_of,
)
from evalplan.kit.errors import InvalidInput, NotInstalled

HARNESS = "inspect_ai"


def _inspect() -> tuple[Any, Any]:
    try:
        from inspect_ai.log import read_eval_log
        from inspect_ai.scorer import value_to_float
    except ImportError:
        raise NotInstalled("inspect log imports need inspect_ai on the server: pip install 'evalplan[inspect]'",
                           [{"field": "files", "detail": "inspect_ai is not installed"}]) from None
    return read_eval_log, value_to_float


def _input_text(value: Any) -> str:
    """A sample's ``input``: a string, or chat messages (their text, one message per paragraph)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n\n".join(getattr(m, "text", None) or text_of(getattr(m, "content", m)) for m in value)
    return text_of(value)


def read_logs(files: list[tuple[str, bytes]]) -> list[tuple[str, Any]]:
    """Read every log with inspect_ai's reader; a file it cannot read is a located 422."""
    read_eval_log, _ = _inspect()
    logs = []
    for name, content in files:
        lower = name.lower()
        if not (lower.endswith(".eval") or lower.endswith(".json")):
            raise InvalidInput(f"{name!r} is not an inspect log",
                               [{"file": name, "detail": "expected a .eval or .json log"}])
        try:
            log = read_eval_log(io.BytesIO(content), format="eval" if lower.endswith(".eval") else "json")
        except Exception as exc:  # the reader raises zip, JSON and pydantic errors alike
            raise InvalidInput(f"inspect_ai cannot read {name!r}: {exc}"[:500],
                               [{"file": name, "detail": f"{type(exc).__name__}: {exc}"[:300]}]) from None
        logs.append((name, log))
    return logs


def _default_scorer(log: Any) -> str | None:
    for scorer in getattr(log.eval, "scorers", None) or []:
        return str(scorer.name)
    for sample in log.samples or []:
        if sample.scores:
            return str(next(iter(sample.scores)))
    return None


def sample_response(sample: Any, score: Any, others: list[tuple[int, Any, Any]]) -> ParsedResponse | None:
    """The response of one sample: its ``output.completion`` (the first epoch's, when there are several), with
    ``extra`` = the scorer's ``value``, ``answer`` and ``explanation``, the ``stop_reason``, the ``epoch``, and
    the other epochs' ``{epoch, completion, value}``. None when the sample has no output."""
    output = getattr(sample, "output", None)
    if output is None:
        return None
    completion = str(output.completion or "")
    explanation = getattr(score, "explanation", None)
    return response_of(completion, {
        "value": text_of(getattr(score, "value", None)),
        "answer": getattr(score, "answer", None),
        "explanation": explanation if explanation != completion else None,
        "stop_reason": getattr(output, "stop_reason", None),
        "epoch": sample.epoch if others else None,
        "epochs": [{"epoch": e, "completion": str(getattr(o, "completion", "") or "")[:MAX_EXTRA_STRING],
                    "value": text_of(getattr(v, "value", None))} for e, o, v in others],
    })


def parse_inspect_logs(files: list[tuple[str, bytes]], *, model: str | None = None, benchmark: str | None = None,
                       scorer: str | None = None) -> ParsedImport:
    """All logs into one import (one benchmark); nothing is returned unless every log parses."""
    _, value_to_float = _inspect()
    to_float = value_to_float()
    if not files:
        raise InvalidInput("no files", [{"field": "files", "detail": "at least one .eval or .json log"}])
    logs = read_logs(files)
    benchmarks = {benchmark or str(log.eval.task) for _, log in logs}
    if len(benchmarks) != 1:
        raise InvalidInput(f"the logs are of several tasks {sorted(benchmarks)}; import them one task at a time "
                           "or set the `benchmark` field",
                           [{"field": "benchmark", "detail": "one benchmark per import"}])
    bench_name = benchmarks.pop()
    skips = SkipLog()
    notes: list[str] = []
    values: dict[str, dict[str, list[float]]] = {}
    items: dict[str, ParsedItem] = {}
    order: list[str] = []
    owner: dict[tuple[str, str], str] = {}
    outputs: dict[str, dict[str, list[tuple[int, Any, Any]]]] = {}  # model -> item -> (epoch, sample, score)
    chosen: str | None = scorer
    for name, log in logs:
        log_scorer = scorer or _default_scorer(log)
        if log_scorer is None:
            raise InvalidInput(f"{name!r} has no scored samples", [{"file": name, "detail": "no scorer"}])
        if chosen is None:
            chosen = log_scorer
        elif log_scorer != chosen:
            raise InvalidInput(f"{name!r} is scored by {log_scorer!r}, another by {chosen!r}; set the `scorer` field",
                               [{"file": name, "field": "scorer", "detail": "one scorer per import"}])
        model_name = model or str(log.eval.model)
        if log.status != "success":
            notes.append(f"{name}: log status is {log.status!r}; only its completed samples were imported")
        seen_scorer = False
        per_model = values.setdefault(model_name, {})
        for sample in log.samples or []:
            item = str(sample.id)
            ident = f"{item} (epoch {sample.epoch})"
            if sample.error is not None:
                skips.add("sample", "the sample ended with an error", ident)
                continue
            if not sample.scores:
                skips.add("sample", "the sample has no scores (not completed)", ident)
                continue
            score = sample.scores.get(chosen)
            if score is None:
                skips.add("sample", f"the sample has no {chosen!r} score", ident)
                continue
            seen_scorer = True
            if isinstance(score.value, (list, dict)):
                skips.add("sample", f"the {chosen!r} value is a list or dict, not one score", ident)
                continue
            key = (model_name, item)
            if owner.setdefault(key, name) != name:
                raise InvalidInput(f"model {model_name!r} has sample {item!r} in two logs",
                                   [{"file": name, "sample": item, "detail": f"also in {owner[key]}"}])
            per_model.setdefault(item, []).append(float(to_float(score.value)))
            outputs.setdefault(model_name, {}).setdefault(item, []).append((int(sample.epoch or 1), sample, score))
            if item not in items:
                order.append(item)
                fields = {"choices": list(sample.choices)} if sample.choices else None
                items[item] = ParsedItem(_input_text(sample.input), text_of(sample.target), fields)
        if not seen_scorer:
            available = sorted({k for s in log.samples or [] for k in (s.scores or {})})
            raise InvalidInput(f"{name!r} has no {chosen!r} scores; its scorers are {available}",
                               [{"file": name, "field": "scorer", "detail": f"choose among {available}"}])
    scores = {m: {i: mean(v) for i, v in row.items()} for m, row in values.items() if row}
    repeats = max((len(v) for row in values.values() for v in row.values()), default=1)
    if repeats > 1:
        notes.append(f"several epochs per sample: each score is the mean of up to {repeats} epochs")
    assert chosen is not None
    responses: dict[str, dict[str, ParsedResponse]] = {}
    for m, by_item in outputs.items():
        for item, runs in by_item.items():
            runs.sort(key=lambda run: run[0])
            (_, first, first_score), rest = runs[0], runs[1:]
            response = sample_response(first, first_score, [(e, smp.output, sc) for e, smp, sc in rest])
            if response is not None:
                responses.setdefault(m, {})[item] = response
    return ParsedImport(HARNESS, bench_name, chosen, scores, items, skips.entries(), notes, repeats, order,
                        responses=responses)
