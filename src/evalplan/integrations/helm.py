"""Read a HELM run (``per_instance_stats.json``, optionally ``scenario_state.json``) into a :class:`ParsedImport`.

HELM writes both with its own ``to_json`` of dataclasses: ``per_instance_stats.json`` is a list of
``PerInstanceStats {instance_id, train_trial_index, perturbation?, stats: [Stat {name: MetricName {name,
split?, sub_split?, perturbation?}, count, sum, mean, ...}]}``; ``scenario_state.json`` is ``ScenarioState
{adapter_spec {model, ...}, request_states: [RequestState {instance {id, input {text}, references [{output
{text}, tags}], split, perturbation?}, train_trial_index, ...}]}``. Plain JSON: no HELM package is needed.
``instance_id`` -> item id; the score is the stat's ``mean``; train trials average; perturbed instances
are skipped unless asked for (then ``<instance_id>@<perturbation name>``). The model's response is the
``RequestState``'s ``result.completions[0].text`` (:func:`helm_response`; only with ``scenario_state.json``).
"""

from __future__ import annotations

import json
from typing import Any

from evalplan.integrations.harness_records import (
    MAX_EXTRA_STRING,
    ParsedImport,
    ParsedItem,
    ParsedResponse,
    SkipLog,
    mean,
    response_of,
)
from evalplan.kit.errors import InvalidInput

HARNESS = "helm"
DEFAULT_STATS = ("exact_match", "quasi_exact_match", "final_number_exact_match", "math_equiv_chain_of_thought")
"""The default stat: the first of these the run has."""


def _load(name: str, content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError as exc:
        raise InvalidInput(f"{name!r} is not JSON: {exc}", [{"file": name, "detail": str(exc)}]) from None


def _classify(files: list[tuple[str, bytes]]) -> dict[str, tuple[str, Any]]:
    known = ("per_instance_stats.json", "scenario_state.json", "run_spec.json")
    found: dict[str, tuple[str, Any]] = {}
    for name, content in files:
        base = name.replace("\\", "/").rsplit("/", 1)[-1]
        if base not in known:
            raise InvalidInput(f"{name!r} is not a HELM run file",
                               [{"file": name, "detail": f"expected one of {list(known)}"}])
        if base in found:
            raise InvalidInput(f"two {base} files; import one HELM run at a time",
                               [{"file": name, "detail": "duplicate"}])
        found[base] = (name, _load(name, content))
    if "per_instance_stats.json" not in found:
        raise InvalidInput("a HELM import needs per_instance_stats.json",
                           [{"field": "files", "detail": "per_instance_stats.json is missing"}])
    return found


def _suffix(perturbation: Any) -> str | None:
    if not perturbation:
        return None
    if isinstance(perturbation, dict):
        return str(perturbation.get("name") or json.dumps(perturbation, sort_keys=True))
    return str(perturbation)


def _stat_name(stat: Any) -> tuple[str, str | None] | None:
    name = stat.get("name") if isinstance(stat, dict) else None
    if isinstance(name, dict) and isinstance(name.get("name"), str):
        return name["name"], _suffix(name.get("perturbation"))
    return None


def _completion(request: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    result = request.get("result")
    if not isinstance(result, dict):
        return None
    completions = result.get("completions")
    if not isinstance(completions, list) or not completions or not isinstance(completions[0], dict):
        return None
    text = completions[0].get("text")
    return (text, result) if isinstance(text, str) else None


def helm_response(requests: list[dict[str, Any]]) -> ParsedResponse | None:
    """The response of one instance from its ``RequestState``s: the first completion's text of the first train
    trial, with ``extra`` = ``mapped_output`` (a multiple-choice letter mapped through ``output_mapping`` to
    its reference), ``n_completions``, and the other trials' ``{train_trial_index, text}``. None without a
    completion, and for the ``multiple_choice_separate_*`` adapters (one request per reference, each scoring
    that reference: no answer of the model's own)."""
    if any(r.get("reference_index") is not None for r in requests):
        return None
    ordered = sorted(requests, key=lambda r: int(r.get("train_trial_index") or 0))
    found = _completion(ordered[0])
    if found is None:
        return None
    text, result = found
    mapping = ordered[0].get("output_mapping")
    mapped = mapping.get(text.strip()) if isinstance(mapping, dict) else None
    completions = result.get("completions") or []
    others = []
    for r in ordered[1:]:
        other = _completion(r)
        if other is not None:
            others.append({"train_trial_index": int(r.get("train_trial_index") or 0),
                           "text": other[0][:MAX_EXTRA_STRING]})
    return response_of(text, {"mapped_output": mapped if isinstance(mapped, str) else None,
                              "n_completions": len(completions) if len(completions) > 1 else None,
                              "train_trial_index": int(ordered[0].get("train_trial_index") or 0) if others else None,
                              "trials": others})


def parse_helm(files: list[tuple[str, bytes]], *, model: str | None = None, benchmark: str | None = None,
               stat: str | None = None, perturbed: bool = False) -> ParsedImport:
    """One HELM run into one import; every record checked before anything is returned."""
    found = _classify(files)
    stats_file, rows = found["per_instance_stats.json"]
    if not isinstance(rows, list):
        raise InvalidInput(f"{stats_file!r} is not a list of per-instance stats",
                           [{"file": stats_file, "detail": "list"}])
    state = found.get("scenario_state.json", (None, None))[1]
    spec = found.get("run_spec.json", (None, None))[1]
    if model is None:
        for source in (state, spec):
            adapter = source.get("adapter_spec") if isinstance(source, dict) else None
            if isinstance(adapter, dict) and isinstance(adapter.get("model"), str):
                model = adapter["model"]
                break
    if model is None:
        raise InvalidInput("the model is unknown: set the `model` field or send scenario_state.json",
                           [{"field": "model", "detail": "required without scenario_state.json"}])
    if benchmark is None and isinstance(spec, dict) and isinstance(spec.get("name"), str):
        benchmark = spec["name"].split(":", 1)[0]
    if benchmark is None:
        raise InvalidInput("set the `benchmark` field (or send run_spec.json)",
                           [{"field": "benchmark", "detail": "required"}])
    names: dict[str, None] = {}
    for row in rows:
        for s in (row.get("stats") or []) if isinstance(row, dict) else []:
            parsed = _stat_name(s)
            if parsed and parsed[1] is None:
                names[parsed[0]] = None
    chosen = stat or next((s for s in DEFAULT_STATS if s in names), None)
    if chosen is None or chosen not in names:
        available = sorted(names)
        raise InvalidInput(f"{stats_file!r} has no {'stat ' + repr(chosen) if chosen else 'default stat'}; "
                           f"its stats are {available[:40]}",
                           [{"field": "stat", "detail": f"choose among {available[:200]}"}])
    skips = SkipLog()
    values: dict[str, list[float]] = {}
    trials: dict[str, set[int]] = {}
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise InvalidInput(f"{stats_file!r} entry {index} has no instance_id",
                               [{"file": stats_file, "entry": index, "detail": "instance_id is missing"}])
        item = row["instance_id"]
        pert = _suffix(row.get("perturbation"))
        if pert is not None:
            if not perturbed:
                skips.add("instance", "perturbed instance (set `perturbed` to import it)", f"{item}@{pert}")
                continue
            item = f"{item}@{pert}"
        value = None
        for s in row.get("stats") or []:
            name = _stat_name(s)
            if name == (chosen, None) and s.get("count", 1):
                value = s.get("mean", s.get("sum"))
                break
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
            skips.add("instance", f"no {chosen!r} value", item)
            continue
        values.setdefault(item, []).append(float(value))
        trials.setdefault(item, set()).add(int(row.get("train_trial_index") or 0))
    items: dict[str, ParsedItem] = {}
    requests_of: dict[str, list[dict[str, Any]]] = {}
    for request in (state or {}).get("request_states") or [] if isinstance(state, dict) else []:
        instance = (request.get("instance") or {}) if isinstance(request, dict) else {}
        if not isinstance(instance, dict) or not isinstance(instance.get("id"), str):
            continue
        item = instance["id"]
        pert = _suffix(instance.get("perturbation"))
        if pert is not None:
            item = f"{item}@{pert}"
        if item in values:
            requests_of.setdefault(item, []).append(request)
        if item in values and item not in items:
            refs = instance.get("references") or []
            correct = [r.get("output", {}).get("text", "") for r in refs if "correct" in (r.get("tags") or [])]
            fields = {"split": instance.get("split"), "references": [r.get("output", {}).get("text", "") for r in refs]}
            items[item] = ParsedItem(str((instance.get("input") or {}).get("text", "")),
                                     "\n".join(correct) if correct else None, fields)
    notes: list[str] = []
    repeats = max((len(v) for v in values.values()), default=1)
    if repeats > 1:
        notes.append(f"several train trials per instance: each score is the mean of up to {repeats} trials")
    scores = {model: {i: mean(v) for i, v in values.items()}}
    responses = {item: r for item, reqs in requests_of.items() if (r := helm_response(reqs)) is not None}
    return ParsedImport(HARNESS, benchmark, chosen, scores if values else {}, items, skips.entries(), notes, repeats,
                        list(values), responses={model: responses} if responses else {})
