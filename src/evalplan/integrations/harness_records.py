"""What a harness-log parser hands to the import service: items, one metric, scores per model, and what
it skipped (and why). Pure: no database, no web, no harness package."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_SKIPPED_IDS = 20
"""How many example ids a skipped entry lists (its ``count`` is the full number)."""


@dataclass
class ParsedItem:
    """One item's text, as the harness logged it."""

    prompt: str
    target: str | None
    fields: dict[str, Any] | None = None


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
    the log carried text for; ``repeats`` is the most values averaged into one score (epochs, trials).
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
