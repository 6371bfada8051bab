"""What another team sees of a coreset it may read (a published version, or one its owner made public):
issue 32 item 5, docs/SECURITY.md "Sharing published coresets".

The rule: the owner's team sees everything. Any other team sees the coreset's items, its benchmarks'
names and sizes, its method, predictor and calibration, and *counts* of its reference (source) models,
but a reference model's name only when that team may read the model anyway (a public model, or one with
scores on a public benchmark: ``evalplan.auth.scoping.readable_clause``). The names it may not read are
withheld from every view of the coreset: the JSON (``reference_models``, ``diagnostics``, ``provenance``,
wherever they occur: :func:`scrub`), the page, and the reference chart, whose points keep their
held-out predicted and true scores under an anonymous label ``reference <i>``
(:func:`shared_prediction_rows`). ``diagnostics.reference_models_withheld`` counts the withheld names.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from evalplan.auth.scoping import team_of
from evalplan.db.models import Coreset
from evalplan.models.repository import team_names_among

NAME_LISTS = ("reference_models", "source_models", "sources")  # where a coreset records model names


def is_owner(session: Session, coreset: Coreset) -> bool:
    return coreset.team_id == team_of(session)


def mentioned_models(coreset: Coreset) -> list[str]:
    """Every model name the coreset records: its reference list, and the lists of its diagnostics and provenance."""
    found: list[str] = []

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key in NAME_LISTS and isinstance(inner, list):
                    found.extend(str(n) for n in inner if isinstance(n, str))
                else:
                    collect(inner)
        elif isinstance(value, list):
            for inner in value:
                collect(inner)

    collect({"reference_models": coreset.reference_models, "diagnostics": coreset.diagnostics,
             "provenance": coreset.provenance})
    return list(dict.fromkeys(found))


def withheld_models(session: Session, coreset: Coreset) -> set[str]:
    """The model names of ``coreset`` that the session's team may not read (empty for the owner)."""
    if is_owner(session, coreset):
        return set()
    names = mentioned_models(coreset)
    if not names:
        return set()
    readable: set[str] = set()
    for start in range(0, len(names), 500):  # team-scoped: only the models the caller may read come back
        chunk = names[start:start + 500]
        readable.update(team_names_among(session, coreset.team_id, chunk))
    return set(names) - readable


def scrub(value: Any, withheld: set[str]) -> Any:
    """``value`` without the ``withheld`` names: dropped from lists, as dict keys, and as string values (None)."""
    if isinstance(value, dict):
        return {k: scrub(v, withheld) for k, v in value.items() if not (isinstance(k, str) and k in withheld)}
    if isinstance(value, list):
        return [scrub(v, withheld) for v in value if not (isinstance(v, str) and v in withheld)]
    if isinstance(value, str) and value in withheld:
        return None
    return value


def shared_view(session: Session, coreset: Coreset, view: dict[str, Any]) -> dict[str, Any]:
    """``view`` (``coreset_view``) as the session's team may see it (module docstring)."""
    withheld = withheld_models(session, coreset)
    if not withheld:
        return view
    out = dict(view)
    for key in ("reference_models", "diagnostics", "provenance", "params"):
        out[key] = scrub(view.get(key), withheld)
    out["diagnostics"] = {**(out["diagnostics"] or {}), "reference_models_withheld": len(withheld)}
    return out


def shared_prediction_rows(session: Session, coreset: Coreset, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reference chart's rows (``{model, benchmark, true, predicted, lo, hi}``) with each withheld model
    named ``reference <i>`` (its position among the coreset's references, so a model keeps one label
    across benchmarks)."""
    withheld = withheld_models(session, coreset)
    if not withheld:
        return rows
    order = {name: i for i, name in enumerate(dict.fromkeys(r["model"] for r in rows))}
    return [{**r, "model": f"reference {order[r['model']] + 1}"} if r["model"] in withheld else r for r in rows]
