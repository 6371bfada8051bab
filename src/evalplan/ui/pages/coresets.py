"""The coreset page: composition by benchmark and capability, the greedy gain curve, the reference
models' held-out predicted vs true scores with intervals, the export buttons, provenance, items with their
text and, for a chosen model (``?model=``), its stored responses (every model's for a searched item)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from evalplan import __version__, charts
from evalplan.auth.deps import DbSession
from evalplan.benchmarks import repository as benchmark_repository
from evalplan.benchmarks.items import item_samples
from evalplan.benchmarks.responses import responses_for
from evalplan.coresets import export as coreset_export
from evalplan.coresets import plots as coreset_plots
from evalplan.coresets import service as coreset_service
from evalplan.kit.errors import EvalplanError
from evalplan.kit.repository import job_by_id
from evalplan.models.service import get_model
from evalplan.ui.routing import page_router
from evalplan.ui.templating import render

router = page_router()
ITEMS_PER_PAGE = 100
EXPORTS = [("lm-eval", "lm-eval", "lm-eval.json", "task -> doc indices, for lm_eval --samples"),
           ("inspect", "inspect", "inspect.json", "task -> sample ids, for inspect eval --sample-id"),
           ("csv", "CSV", "csv", "benchmark, item, rank, gain, weight"),
           ("jsonl", "JSONL", "jsonl", "one item per line")]


def provenance(view: dict[str, Any]) -> dict[str, Any]:
    """What made this coreset: the stored ``provenance`` when the service records one, else the
    fields of the coreset that determine it."""
    if view.get("provenance"):
        return dict(view["provenance"])
    return {"method": view["method"], "params": view["params"], "seed": view["seed"],
            "budget": view["budget"], "reference_models": view["reference_models"],
            "predictor": view["predictor"], "embedding_model": view["embedding_model"],
            "benchmarks": view["benchmarks"], "job": (view.get("job") or {}).get("id"),
            "service_version": __version__}


def export_problems(session: Session, coreset: Any) -> dict[str, str]:
    """Why a format cannot be exported (e.g. lm-eval without doc indices), by the export itself."""
    problems: dict[str, str] = {}
    if coreset.status != "ready":
        return problems
    for fmt, *_ in EXPORTS:
        try:
            coreset_export.export_coreset(session, coreset, fmt)
        except EvalplanError as exc:
            problems[fmt] = exc.detail
    return problems


def charts_of(session: Session, coreset: Any, items: list[dict[str, Any]]) -> dict[str, Any]:
    if coreset.status != "ready":
        return {}
    out: dict[str, Any] = {"composition_svg": charts.to_inline_svg(
        coreset_plots.composition_chart(session, coreset, items), label="Coreset composition", prefix="composition")}
    gains = coreset_plots.gain_chart(coreset, items)
    if gains is not None:
        out["gain_svg"] = charts.to_inline_svg(gains, label="Greedy gain curve", prefix="gains")
    rows = coreset_plots.prediction_rows(session, coreset)
    prediction = coreset_plots.prediction_chart(rows)
    if prediction is not None:
        out["prediction_svg"] = charts.to_inline_svg(prediction, label="Predicted vs true scores of the reference "
                                                     "models", prefix="predictions")
        out["predictions"] = rows
        out["design_interval"] = (coreset.params or {}).get("interval") == "design"
    return out


def auto_choices(diagnostics: dict[str, Any] | None, names: dict[str, str]) -> list[dict[str, Any]]:
    """What ``method: "auto"`` chose on each benchmark and why (``diagnostics.auto``, ``evalplan.core.coresets.auto``):
    the choice in words, the rule that chose it, the honest (outer-fold) error and the inner CV table, the
    chosen row marked."""
    out: list[dict[str, Any]] = []
    for bid, auto in ((diagnostics or {}).get("auto") or {}).items():
        choice = auto.get("choice") or {}
        rows = [dict(r, chosen=r.get("label") == choice.get("label")) for r in auto.get("cv_table") or []]
        out.append({"benchmark": names.get(bid, bid), "choice": choice, "rule": auto.get("choice_rule") or {},
                    "honest_rmse": auto.get("honest_rmse"), "honest_mae": auto.get("honest_mae"),
                    "n_folds": len(auto.get("outer_folds") or []), "table": rows,
                    "skipped": auto.get("skipped") or []})
    return out


def pending_context(session: Session, coreset_id: str) -> dict[str, Any]:
    coreset = coreset_service.get_coreset(session, coreset_id)
    # another team's published version is shared without its selection job (that stays the owner's)
    job = job_by_id(session, coreset.job_id) if coreset.job_id else None
    return {"coreset": coreset, "job": job}


@router.get("/ui/coresets/{coreset_id}/live")
def coreset_fragment(request: Request, coreset_id: str, session: DbSession) -> Response:
    return render(request, "_coreset_pending.html", **pending_context(session, coreset_id))


def shown_responses(session: Session, ids: dict[str, str], shown: list[dict[str, Any]], model: str | None,
                    item: str | None) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The stored responses of the shown items by (benchmark name, item id): the chosen ``model``'s, or, for a
    searched ``item`` without a model, every readable model's."""
    if model is None and item is None:
        return {}
    by_benchmark: dict[str, list[str]] = {}
    for i in shown:
        if i["benchmark"] in ids:
            by_benchmark.setdefault(i["benchmark"], []).append(i["item"])
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for name, item_ids in by_benchmark.items():
        rows = responses_for(session, ids[name], item_ids, models=[model] if model is not None else None)
        found.update({(name, item_id): r for item_id, r in rows.items()})
    return found


@router.get("/ui/coresets/{coreset_id}")
def coreset_page(request: Request, coreset_id: str, session: DbSession,
                 start: Annotated[int, Query(ge=0, description="First item shown (rank order)")] = 0,
                 item: Annotated[str | None, Query(max_length=200, description="Show this item id only")] = None,
                 model: Annotated[str | None, Query(max_length=300, description="Show this model's responses")] = None
                 ) -> Response:
    coreset = coreset_service.get_coreset(session, coreset_id)
    view = coreset_service.coreset_view(session, coreset)
    items = view["items"]
    item = (item or "").strip() or None
    shown = [i for i in items if i["item"] == item] if item is not None else items[start:start + ITEMS_PER_PAGE]
    ids = benchmark_repository.ids_by_name(session, coreset.benchmark_ids or [])
    texts = item_samples(session, [(ids[i["benchmark"]], i["item"]) for i in shown if i["benchmark"] in ids])
    samples = {(name, item_id): text for (bid, item_id), text in texts.items() for name, b in ids.items() if b == bid}
    response_models = benchmark_repository.models_with_responses(session, list(ids.values()))
    model = (model or "").strip() or None
    if model is not None:  # a name (the picker's value) or an id; 404 page for a model the caller cannot read
        model = next((name for mid, name in response_models if model in (mid, name)), None) or \
            get_model(session, model).name
    stem = f"{coreset.name or coreset.id}" + (f"-v{coreset.version}" if coreset.name else "")
    auto = auto_choices(coreset.diagnostics, {b: name for name, b in ids.items()})
    made = provenance(view)
    if auto and made.get("predictor") == "auto":  # not "auto, params {}": what it chose (the table below says why)
        made["predictor"] = "auto, chose " + "; ".join(f"{a['benchmark']}: {a['choice'].get('label')}" for a in auto)
    return render(request, "coreset.html", c=view, coreset=coreset, job=pending_context(session, coreset_id)["job"],
                  provenance=made, exports=EXPORTS, export_problems=export_problems(session, coreset),
                  stem=stem,
                  page_items=shown, start=start, per_page=ITEMS_PER_PAGE, item=item, samples=samples,
                  model=model, response_models=response_models,
                  responses=shown_responses(session, ids, shown, model, item),
                  auto=auto,
                  **charts_of(session, coreset, items))
