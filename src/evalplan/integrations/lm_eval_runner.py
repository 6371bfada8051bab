"""``evalplan run lm-eval``: an Evalplan session (or a static coreset) evaluated through lm-eval's Python API.

The model is built once (``lm_eval.api.registry.get_model(name).create_from_arg_string(model_args)``) and
every batch is one ``lm_eval.simple_evaluate(model=<that LM>, tasks=[task], samples={task: doc ids})``: no
new process per batch. Doc ids are passed sorted and unique (lm-eval logs the wrong ``doc_id`` for
unsorted ``--samples`` lists). Item ids are the doc ids as strings, as ``POST /v1/imports/lm-eval`` stores
them. With ``output_path`` lm-eval's own ``EvaluationTracker`` appends every batch to one
``samples_<task>_<date>.jsonl`` (importable with ``POST /v1/imports/lm-eval``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TextIO

from evalplan.client import EvalplanClient

Progress = Callable[[dict[str, Any]], None]


class LmEvalRunner:
    """One loaded lm-eval model and task manager; :meth:`evaluate` scores doc ids of a task."""

    def __init__(self, model: str, model_args: str = "", *, include_path: str | None = None,
                 output_path: str | None = None, metric: str | None = None, filter_name: str = "none",
                 batch_size: int | str | None = None, device: str | None = None) -> None:
        from lm_eval.api.registry import get_model
        from lm_eval.tasks import TaskManager

        self.model_name = model
        self.model_args = model_args
        self.lm = get_model(model).create_from_arg_string(model_args, {"batch_size": batch_size, "device": device})
        self.task_manager = TaskManager(include_path=include_path) if include_path else TaskManager()
        self.metric = metric
        self.filter_name = filter_name
        self.tracker: Any = None
        if output_path:
            from lm_eval.loggers import EvaluationTracker

            self.tracker = EvaluationTracker(output_path=output_path)
            # lm-eval sets date_id in save_results_aggregated (which its CLI calls first); the same stamp here
            self.tracker.date_id = datetime.now().isoformat().replace(":", "-")
        self.n_calls = 0

    def evaluate(self, task: str, doc_ids: Iterable[int]) -> dict[int, float]:
        """doc id -> the metric's value (sorted unique ids, one ``simple_evaluate`` call)."""
        import lm_eval

        ids = sorted(set(int(i) for i in doc_ids))
        if not ids:
            return {}
        results = lm_eval.simple_evaluate(model=self.lm, model_args=self.model_args, tasks=[task],
                                          task_manager=self.task_manager, samples={task: ids}, log_samples=True,
                                          evaluation_tracker=self.tracker, verbosity="ERROR")
        self.n_calls += 1
        records = results["samples"][task]
        if self.tracker is not None:
            self.tracker.save_results_samples(task_name=task, samples=records)
        scores: dict[int, float] = {}
        for record in records:
            if record.get("filter", "none") != self.filter_name:
                continue
            metric = self.metric or record["metrics"][0]
            scores[int(record["doc_id"])] = float(record[metric])
        missing = set(ids) - set(scores)
        if missing:
            raise RuntimeError(f"lm-eval returned no {self.filter_name!r} scores for doc ids {sorted(missing)[:10]}")
        return scores


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _line(session: dict[str, Any]) -> str:
    ci = session.get("ci") or [None, None]
    est = session.get("estimate")
    fmt = _fmt
    return f"n={session.get('n_observed')} estimate={fmt(est)} ci=[{fmt(ci[0])}, {fmt(ci[1])}]"


def run_session(client: EvalplanClient, runner: LmEvalRunner, *, task: str, benchmark: str, target: str,
                session_fields: dict[str, Any], out: TextIO = sys.stderr, progress_bar: bool = True) -> dict[str, Any]:
    """Open a session, evaluate its proposed doc ids batch by batch, post them, until it stops."""
    from tqdm import tqdm

    session = client.create_session(benchmark, target, **session_fields)
    total = session.get("max_items") if isinstance(session.get("max_items"), int) else None
    bar = tqdm(total=total, desc=f"evalplan {benchmark}", file=out, disable=not progress_bar, unit="item")
    try:
        while session["status"] != "stopped":
            items = session.get("next_items") or []
            if not items:
                break
            scores = runner.evaluate(task, (int(i) for i in items))
            session = client.observe_many(session["id"], [(str(d), s) for d, s in sorted(scores.items())])
            bar.update(len(scores))
            bar.set_postfix_str(_line(session))
    finally:
        bar.close()
    return session


def run_coreset(client: EvalplanClient, runner: LmEvalRunner, *, coreset: str, tasks: list[str] | None,
                model: str | None = None) -> dict[str, Any]:
    """Evaluate a static coreset's doc ids (its ``lm-eval`` export) and return its predicted full scores."""
    export: dict[str, list[int]] = client.export_coreset(coreset, "lm-eval")
    if tasks:
        unknown = set(tasks) - set(export)
        if unknown:
            raise ValueError(f"coreset {coreset} has no items of {sorted(unknown)}; it covers {sorted(export)}")
        export = {t: export[t] for t in tasks}
    scores = []
    for task, ids in export.items():
        for doc_id, score in runner.evaluate(task, ids).items():
            scores.append({"benchmark": task, "item": str(doc_id), "score": score})
    return client.predict_coreset(coreset, scores, model=model)
