"""What a harness-log parser hands to the import service: items, one metric, scores per model, and what
it skipped (and why). Pure: no database, no web, no harness package."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_SKIPPED_IDS = 20
"""How many example ids a skipped entry lists (its ``count`` is the full number)."""

MAX_RESPONSE_CHARS = 20_000
"""The longest model response stored: a longer one keeps its first ``MAX_RESPONSE_CHARS`` characters, with
``truncated`` set and ``n_chars`` the full length (docs/DECISIONS.md "Model responses")."""

MAX_EXTRA_STRING = 2_000
"""The longest string kept in a response's ``extra`` (the filtered answer, an explanation)."""

MAX_EXTRA_LIST = 100
"""The most elements kept of a list in ``extra`` (log-likelihoods of the choices, other epochs)."""

MAX_EXTRA_CHARS = 20_000
"""A response's ``extra`` whose JSON is longer than this is dropped (``{"omitted": ...}`` says so)."""


@dataclass
class ParsedItem:
    """One item's text, as the harness logged it; ``source_index`` its row in the task's dataset where the log
    says (lm-eval's ``doc_id``)."""

    prompt: str
    target: str | None
    fields: dict[str, Any] | None = None
    source_index: int | None = None


@dataclass
class ParsedResponse:
    """What a model answered on one item: ``text`` (at most ``MAX_RESPONSE_CHARS``; ``n_chars`` is the
    length before truncation) and ``extra``, what else the log said about it (small JSON). Build it with
    :func:`response_of`."""

    text: str
    n_chars: int
    extra: dict[str, Any] | None = None

    @property
    def truncated(self) -> bool:
        return self.n_chars > len(self.text)


def _clean_text(text: str, limit: int) -> str:
    # PostgreSQL text holds no NUL; every backend stores the same replacement character
    return text[:limit].replace("\x00", "\ufffd")


def clean_extra(value: Any, depth: int = 0) -> Any:
    """``value`` made small and storable as JSON on every backend: strings cut to ``MAX_EXTRA_STRING``,
    lists to ``MAX_EXTRA_LIST`` elements, non-finite numbers null, other objects as text, depth <= 4."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return _clean_text(value, MAX_EXTRA_STRING)
    if depth >= 4:
        return _clean_text(json.dumps(value, default=str, ensure_ascii=False), MAX_EXTRA_STRING)
    if isinstance(value, dict):
        return {_clean_text(str(k), 200): clean_extra(v, depth + 1) for k, v in list(value.items())[:MAX_EXTRA_LIST]}
    if isinstance(value, list | tuple):
        return [clean_extra(v, depth + 1) for v in list(value)[:MAX_EXTRA_LIST]]
    return _clean_text(str(value), MAX_EXTRA_STRING)


def response_of(text: str, extra: dict[str, Any] | None = None) -> ParsedResponse:
    """A :class:`ParsedResponse`: ``text`` cut to ``MAX_RESPONSE_CHARS`` (NUL replaced), ``extra`` without
    its null entries, cleaned by :func:`clean_extra` and dropped when its JSON is over ``MAX_EXTRA_CHARS``."""
    kept = {k: v for k, v in (extra or {}).items() if v is not None and v != "" and v != []}
    cleaned = clean_extra(kept) if kept else None
    if cleaned and len(json.dumps(cleaned, ensure_ascii=False)) > MAX_EXTRA_CHARS:
        cleaned = {"omitted": f"the log's details of this response were over {MAX_EXTRA_CHARS} characters"}
    return ParsedResponse(_clean_text(text, MAX_RESPONSE_CHARS), len(text), cleaned or None)


@dataclass
class Skipped:
    """Records left out of an import for one reason."""

    what: str
    why: str
    count: int = 0
    ids: list[str] = field(default_factory=list)

    def add(self, ident: str) -> None:
        self.count += 1
        if len(self.ids) < MAX_SKIPPED_IDS:
            self.ids.append(ident)


@dataclass
class ParsedImport:
    """Everything one import stores: one benchmark, one metric, one or more models.

    ``scores[model][item]`` is the (averaged) score; ``items`` holds the text of every scored item
    the log carried text for; ``repeats`` is the most values averaged into one score (epochs, trials);
    ``responses[model][item]`` what the model answered on a scored item, where the log says.

    ``description`` is the new benchmark's description (default "Imported from <harness> logs"); ``source``,
    the one file the records come from (lm-eval: a file per task), is named in the message of an error about
    the scores, and ``locate(model, item)`` gives such an error's location fields (default ``model``, ``item``,
    ``metric``); ``filter`` is lm-eval's filter (the post-processing the scores are of), None elsewhere.
    """

    harness: str
    benchmark: str
    metric: str
    scores: dict[str, dict[str, float]]
    items: dict[str, ParsedItem]
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    repeats: int = 1
    item_order: list[str] = field(default_factory=list)
    responses: dict[str, dict[str, ParsedResponse]] = field(default_factory=dict)
    description: str | None = None
    source: str | None = None
    locate: Callable[[str, str], dict[str, Any]] | None = None
    filter: str | None = None

    def location(self, model: str, item: str) -> dict[str, Any]:
        """Where an error about ``scores[model][item]`` points."""
        if self.locate is not None:
            return self.locate(model, item)
        return {"model": model, "item": item, "metric": self.metric}

    def item_ids(self) -> list[str]:
        """Every scored item id, in the log's order."""
        seen: dict[str, None] = dict.fromkeys(self.item_order)
        for row in self.scores.values():
            seen.update(dict.fromkeys(row))
        return list(seen)


class SkipLog:
    """Collects :class:`Skipped` entries keyed by reason, in first-seen order."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], Skipped] = {}

    def add(self, what: str, why: str, ident: str) -> None:
        self._entries.setdefault((what, why), Skipped(what, why)).add(ident)

    def entries(self) -> list[Skipped]:
        return list(self._entries.values())


def text_of(value: Any) -> str:
    """A target or input as text: strings as they are, lists of strings one per line, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)
