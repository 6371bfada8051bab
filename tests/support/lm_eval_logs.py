"""Test helper (not a test module): write lm-evaluation-harness ``--log_samples`` files.

The records mirror what ``lm_eval --log_samples`` (0.4.x) writes, one line per (doc, filter),
grouped by filter: ``doc_id, doc, target, arguments, resps, filtered_resps, filter, metrics,
doc_hash, prompt_hash, target_hash`` followed by one top-level key per metric.

``arguments_form="dict"`` is the newer layout (``{"gen_args_0": {"arg_0": ..., "arg_1": ...}}``,
``target`` and ``resps`` stringified); ``"list"`` is the older one (``[[context, arg], ...]``,
raw ``target`` and numeric ``resps``). Everything is deterministic from ``seed``.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

DEFAULT_DATE = "2024-06-26T12-00-00.123456"
GEN_KWARGS: dict[str, Any] = {"until": ["\n\n", "Question:"], "do_sample": False}

Kind = Literal["loglikelihood", "generate_until"]
ArgumentsForm = Literal["dict", "list"]
ScoreFn = Callable[[int, str, str], Any]
"""``(doc_id, filter, metric) -> value`` overriding a generated metric value."""

_WORDS = (
    "river mountain engine protein market orbit signal theorem harvest lattice "
    "voltage glacier enzyme budget planet circuit sonnet tariff neuron canyon"
).split()


def hash_string(text: str) -> str:
    """sha256 hex digest, as the harness computes doc/prompt/target hashes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def samples_filename(task: str, date: str = DEFAULT_DATE) -> str:
    return f"samples_{task}_{date}.jsonl"


def make_docs(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` simple multiple-choice docs ``{"question", "choices", "answer"}``."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        a, b = rng.sample(_WORDS, 2)
        choices = rng.sample(_WORDS, 4)
        docs.append(
            {
                "question": f"Q{i}: which word relates {a} to {b}?",
                "choices": choices,
                "answer": rng.randrange(4),
            }
        )
    return docs


def _context(doc: dict[str, Any], kind: Kind) -> str:
    if kind == "loglikelihood":
        return f"Question: {doc['question']}\nAnswer:"
    letters = "ABCDEFGH"
    options = "\n".join(f"{letters[i]}. {c}" for i, c in enumerate(doc["choices"]))
    return f"Question: {doc['question']}\n{options}\nAnswer:"


def _argmax(values: Sequence[float]) -> int:
    return max(range(len(values)), key=lambda i: values[i])


def samples_log_records(
    task: str,
    docs: Sequence[dict[str, Any]],
    *,
    metrics: Sequence[str] | None = None,
    filters: Sequence[str] = ("none",),
    kind: Kind = "loglikelihood",
    seed: int = 0,
    arguments_form: ArgumentsForm = "dict",
    bool_scores: bool = False,
    score_fn: ScoreFn | None = None,
    shuffle: bool = False,
) -> list[dict[str, Any]]:
    """The records of a samples log, in file order (by filter, then doc order).

    ``metrics`` defaults to ``("acc", "acc_norm")`` for loglikelihood and
    ``("exact_match",)`` for generate_until. ``shuffle`` writes the docs out of
    ``doc_id`` order (the same order for every filter).
    """
    if kind not in ("loglikelihood", "generate_until"):
        raise ValueError(f"unknown kind {kind!r}")
    if arguments_form not in ("dict", "list"):
        raise ValueError(f"unknown arguments_form {arguments_form!r}")
    if metrics is None:
        metrics = ("acc", "acc_norm") if kind == "loglikelihood" else ("exact_match",)
    rng = random.Random(seed)
    stringify = arguments_form == "dict"  # the newer harness stringifies resps and target

    # Draw per-doc model behaviour once; every filter sees the same responses.
    per_doc: list[dict[str, Any]] = []
    for doc_id, doc in enumerate(docs):
        context = _context(doc, kind)
        if kind == "loglikelihood":
            conts = [f" {c}" for c in doc["choices"]]
            # Log-likelihood grows with length (so acc_norm can disagree with acc);
            # the gold continuation gets a bonus often enough for a better-than-chance model.
            lls = [-len(c) * rng.uniform(0.5, 2.5) for c in conts]
            if rng.random() < 0.6:
                lls[doc["answer"]] += rng.uniform(0.0, 8.0)
            lls = [round(ll, 4) for ll in lls]
            norm = [ll / len(c) for ll, c in zip(lls, conts, strict=True)]
            requests: list[list[Any]] = [[context, c] for c in conts]
            resps: Any = [[[str(ll), "False"] if stringify else [ll, False]] for ll in lls]
            filtered = [[str(ll), "False"] if stringify else [ll, False] for ll in lls]
            base = {
                "acc": float(_argmax(lls) == doc["answer"]),
                "acc_norm": float(_argmax(norm) == doc["answer"]),
            }
            target: Any = doc["answer"]
            per_filter = {f: (filtered, base) for f in filters}
            extra = [rng.random() for _ in metrics]
        else:
            target = doc["choices"][doc["answer"]]
            correct = rng.random() < 0.6
            picked = target if correct else rng.choice(
                [c for c in doc["choices"] if c != target] or [target]
            )
            explained = rng.random() < 0.3
            raw = f" {picked}" + (" because it fits best." if explained else "")
            requests = [[context, dict(GEN_KWARGS)]]
            resps = [[raw]]
            per_filter = {}
            for f in filters:
                if f == "none":
                    out = raw
                elif f == "strict-match":
                    out = picked if not explained else "[invalid]"
                else:
                    out = picked
                value = float(out.strip() == target)
                per_filter[f] = ([out], {"exact_match": value, "acc": value})
            extra = [rng.random() for _ in metrics]
        per_doc.append(
            {
                "doc_id": doc_id,
                "doc": doc,
                "context": context,
                "requests": requests,
                "resps": resps,
                "target": target,
                "per_filter": per_filter,
                "extra": extra,
            }
        )

    order = list(range(len(docs)))
    if shuffle:
        random.Random(seed + 1).shuffle(order)

    records: list[dict[str, Any]] = []
    for f in filters:
        for idx in order:
            d = per_doc[idx]
            filtered, base = d["per_filter"][f]
            if arguments_form == "dict":
                arguments: Any = {
                    f"gen_args_{i}": {f"arg_{j}": a for j, a in enumerate(req)}
                    for i, req in enumerate(d["requests"])
                }
                target_out: Any = str(d["target"])
            else:
                arguments = [list(req) for req in d["requests"]]
                target_out = d["target"]
            record: dict[str, Any] = {
                "doc_id": d["doc_id"],
                "doc": d["doc"],
                "target": target_out,
                "arguments": arguments,
                "resps": d["resps"],
                "filtered_resps": filtered,
                "filter": f,
                "metrics": list(metrics),
                "doc_hash": hash_string(json.dumps(d["doc"], indent=2, ensure_ascii=False)),
                "prompt_hash": hash_string(d["context"]),
                "target_hash": hash_string(str(d["target"])),
            }
            for m, draw in zip(metrics, d["extra"], strict=True):
                value: Any = base[m] if m in base else float(draw < 0.5)
                if score_fn is not None:
                    override = score_fn(d["doc_id"], f, m)
                    value = value if override is None else override
                if bool_scores and value in (0.0, 1.0) and not isinstance(value, bool):
                    value = bool(value)
                record[m] = value
            records.append(record)
    return records


def records_to_bytes(records: Sequence[dict[str, Any]]) -> bytes:
    """Serialise records one JSON object a line, as the harness does."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def samples_log_bytes(task: str, docs: Sequence[dict[str, Any]], **kwargs: Any) -> bytes:
    """The bytes of a samples log; keyword arguments as :func:`samples_log_records`."""
    return records_to_bytes(samples_log_records(task, docs, **kwargs))


def write_samples_log(
    path_dir: str | Path,
    task: str,
    docs: Sequence[dict[str, Any]],
    *,
    metrics: Sequence[str] | None = None,
    filters: Sequence[str] = ("none",),
    kind: Kind = "loglikelihood",
    seed: int = 0,
    date: str = DEFAULT_DATE,
    arguments_form: ArgumentsForm = "dict",
    bool_scores: bool = False,
    score_fn: ScoreFn | None = None,
    shuffle: bool = False,
) -> Path:
    """Write ``samples_<task>_<date>.jsonl`` under ``path_dir`` and return its path.

    ``metrics=None`` picks the kind's usual metrics: ``("acc", "acc_norm")`` for
    loglikelihood, ``("exact_match",)`` for generate_until.
    """
    path = Path(path_dir) / samples_filename(task, date)
    path.write_bytes(
        samples_log_bytes(
            task,
            docs,
            metrics=metrics,
            filters=filters,
            kind=kind,
            seed=seed,
            arguments_form=arguments_form,
            bool_scores=bool_scores,
            score_fn=score_fn,
            shuffle=shuffle,
        )
    )
    return path
