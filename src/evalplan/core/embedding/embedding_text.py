"""The text that represents an item for semantic embeddings (papers/000, §3.1 and Appendix B).

An item's text is its prompt, then its target (the ground truth), then each of the benchmark's
configured ``embedding_fields`` taken from the item's ``fields``. Structured values are serialized
as compact JSON rather than flattened to prose, so that fine-grained format differences (keys,
nesting, list layout) stay visible in the similarities.

Exact layout: the parts below, joined by one blank line (``"\\n\\n"``), empty parts left out::

    <prompt>                  as-is (may be "")
    <target>                  as-is; left out when null or ""
    <field>: <value>          one per configured field, in the configured order; left out when the
                              field is absent or null. ``<field>`` is the configured name as
                              written (e.g. ``rubric.ground_truth``); ``<value>`` is a string
                              as-is, anything else (numbers, booleans, lists, objects) as
                              ``json.dumps(v, ensure_ascii=False, separators=(",", ":"),
                              sort_keys=True)``.

A configured name is looked up as a literal key of ``fields`` first; if there is none and the
name contains dots, it is followed as a path through nested objects (``"rubric.ground_truth"`` ->
``fields["rubric"]["ground_truth"]``). List indices are not supported.

Items whose prompt is null are score-only and have no text: :func:`item_text` refuses them, and
:func:`has_text` tells them apart.

Embeddings are cached by ``(text_hash(text), model)``, so a rename, a re-upload or another
benchmark holding the same text never re-embeds; changing this layout changes the texts, hence the
hashes, and so recomputes (never reuses a stale vector).

Pure Python: no web, database or numerical imports.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

SEPARATOR = "\n\n"
_MISSING = object()


def has_text(prompt: str | None) -> bool:
    """Whether an item has text to embed (score-only items have a null prompt)."""
    return prompt is not None


def field_value(fields: Mapping[str, Any] | None, name: str) -> Any:
    """The value of a configured field: a literal key first, else a dotted path; ``None`` if absent."""
    if not fields:
        return None
    value = fields.get(name, _MISSING)
    if value is not _MISSING:
        return value
    if "." not in name:
        return None
    node: Any = fields
    for part in name.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def serialize_value(value: Any) -> str:
    """A string as-is; any other JSON value as compact, key-sorted JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def item_text(
    prompt: str | None,
    target: str | None,
    fields: Mapping[str, Any] | None,
    embedding_fields: Sequence[str] | None = (),
) -> str:
    """The embedding text of an item (layout in the module docstring).

    Raises ``ValueError`` for a score-only item (``prompt is None``).
    """
    if prompt is None:
        raise ValueError("a score-only item (null prompt) has no embedding text")
    parts = [prompt] if prompt != "" else []
    if target is not None and target != "":
        parts.append(target if isinstance(target, str) else serialize_value(target))
    for name in embedding_fields or ():
        value = field_value(fields, name)
        if value is None:
            continue
        parts.append(f"{name}: {serialize_value(value)}")
    return SEPARATOR.join(parts)


def text_hash(text: str) -> str:
    """SHA-256 (hex) of the UTF-8 text: the cache key of its embeddings, with the model name."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
