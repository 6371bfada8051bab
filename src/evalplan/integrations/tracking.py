"""Tracking sinks (optional extras): a session's trajectory and a coreset's predictions as MLflow or
Weights & Biases metrics.

Names follow lm-eval's ``wandb_logger`` (``<task>/<metric>``): a session logs ``<benchmark>/estimate``,
``<benchmark>/ci_lower``, ``<benchmark>/ci_upper`` and ``<benchmark>/ci_half_width`` at ``step = n``
(observations), one step per trajectory row, with the session's fields as params and its outcome
(``status``, ``stop_reason``) as tags / summary; a coreset prediction logs the same names once per
benchmark plus ``overall/...``. ``pip install 'evalplan[mlflow]'`` / ``'evalplan[wandb]'``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from evalplan.client import EvalplanClient

WandbMode = Literal["online", "offline", "disabled", "shared"]
SESSION_PARAMS = ("id", "benchmark", "target", "method", "level", "max_items", "batch_size", "seed")


def _interval_metrics(prefix: str, estimate: float | None, interval: list[float] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    if estimate is not None:
        out[f"{prefix}/estimate"] = float(estimate)
    if interval and interval[0] is not None and interval[1] is not None:
        out[f"{prefix}/ci_lower"] = float(interval[0])
        out[f"{prefix}/ci_upper"] = float(interval[1])
        out[f"{prefix}/ci_half_width"] = (float(interval[1]) - float(interval[0])) / 2
    return out


def session_steps(session: dict[str, Any], trajectory: list[dict[str, Any]]) -> list[tuple[int, dict[str, float]]]:
    """``(n, metrics)`` per trajectory row of a session."""
    prefix = str(session["benchmark"])
    return [(int(row["n"]), _interval_metrics(prefix, row.get("estimate"), row.get("ci"))) for row in trajectory]


def prediction_metrics(prediction: dict[str, Any]) -> dict[str, float]:
    """A ``POST /v1/coresets/{id}/predict`` answer as flat metrics."""
    out: dict[str, float] = {}
    for name, bench in (prediction.get("benchmarks") or {}).items():
        out.update(_interval_metrics(str(name), bench.get("estimate"), bench.get("interval")))
    overall = prediction.get("overall")
    if isinstance(overall, dict):
        out.update(_interval_metrics("overall", overall.get("estimate"), overall.get("interval")))
    if "extrapolation" in prediction:
        out["extrapolation"] = float(bool(prediction["extrapolation"]))
    return out


def _session_params(session: dict[str, Any]) -> dict[str, str]:
    return {f"evalplan.{k}": str(session[k]) for k in SESSION_PARAMS if session.get(k) is not None}


# ----------------------------------------------------------------------------- MLflow

def _is_file_store(uri: str | None) -> bool:
    """A file-system tracking store: ``file://...`` or a plain path (MLflow's ``./mlruns`` default)."""
    uri = uri if uri is not None else os.environ.get("MLFLOW_TRACKING_URI")
    if uri is None:
        return False  # MLflow's own default; its choice and its message
    return uri.startswith("file:") or "://" not in uri and not uri.startswith(("databricks", "sqlite"))


@contextmanager
def _file_store_allowed(uri: str | None) -> Iterator[None]:
    """MLflow >= 3.7 refuses a file store unless ``MLFLOW_ALLOW_FILE_STORE=true`` ("maintenance mode").
    A ``file://`` URI passed here is the caller's explicit choice, so the switch is set for the call
    (and restored after); the store still works as before (checked with mlflow-skinny 3.18)."""
    if not _is_file_store(uri) or os.environ.get("MLFLOW_ALLOW_FILE_STORE"):
        yield
        return
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        yield
    finally:
        os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)


def log_session_mlflow(client: EvalplanClient, session_id: str, *, tracking_uri: str | None = None,
                       experiment: str = "evalplan", run_name: str | None = None) -> str:
    """Log a session's trajectory to a new MLflow run; returns the run id. A ``file://`` store works
    on MLflow 3.x too (see :func:`_file_store_allowed`)."""
    with _file_store_allowed(tracking_uri):
        return _log_session_mlflow(client, session_id, tracking_uri=tracking_uri, experiment=experiment,
                                   run_name=run_name)


def _log_session_mlflow(client: EvalplanClient, session_id: str, *, tracking_uri: str | None,
                        experiment: str, run_name: str | None) -> str:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    session = client.get_session(session_id)
    steps = session_steps(session, client.trajectory(session_id))
    mlflow = MlflowClient(tracking_uri)
    exp = mlflow.get_experiment_by_name(experiment)
    experiment_id = exp.experiment_id if exp is not None else mlflow.create_experiment(experiment)
    run = mlflow.create_run(experiment_id, run_name=run_name or f"{session['benchmark']}:{session['target']}")
    metrics = [Metric(key, value, 0, step) for step, row in steps for key, value in row.items()]
    params = [Param(k, v) for k, v in _session_params(session).items()]
    tags = [RunTag("evalplan.status", str(session.get("status"))),
            RunTag("evalplan.stop_reason", str(session.get("stop_reason")))]
    for start in range(0, len(metrics), 900):  # MLflow caps a batch at 1000 entries
        mlflow.log_batch(run.info.run_id, metrics=metrics[start:start + 900],
                         params=params if start == 0 else [], tags=tags if start == 0 else [])
    if not metrics:
        mlflow.log_batch(run.info.run_id, params=params, tags=tags)
    mlflow.set_terminated(run.info.run_id)
    return str(run.info.run_id)


def log_prediction_mlflow(prediction: dict[str, Any], *, coreset: str, model: str | None = None,
                          tracking_uri: str | None = None, experiment: str = "evalplan") -> str:
    """Log a coreset's predicted full scores to a new MLflow run; returns the run id."""
    with _file_store_allowed(tracking_uri):
        return _log_prediction_mlflow(prediction, coreset=coreset, model=model, tracking_uri=tracking_uri,
                                      experiment=experiment)


def _log_prediction_mlflow(prediction: dict[str, Any], *, coreset: str, model: str | None,
                           tracking_uri: str | None, experiment: str) -> str:
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    mlflow = MlflowClient(tracking_uri)
    exp = mlflow.get_experiment_by_name(experiment)
    experiment_id = exp.experiment_id if exp is not None else mlflow.create_experiment(experiment)
    run = mlflow.create_run(experiment_id, run_name=f"coreset:{coreset}:{model or ''}")
    params = [Param("evalplan.coreset", coreset)] + ([Param("evalplan.model", model)] if model else [])
    mlflow.log_batch(run.info.run_id, metrics=[Metric(k, v, 0, 0) for k, v in prediction_metrics(prediction).items()],
                     params=params)
    mlflow.set_terminated(run.info.run_id)
    return str(run.info.run_id)


# ----------------------------------------------------------------------------- Weights & Biases

def log_session_wandb(client: EvalplanClient, session_id: str, *, project: str = "evalplan",
                      mode: WandbMode | None = None, directory: str | None = None) -> str:
    """Log a session's trajectory to a new W&B run (``mode="offline"`` writes it locally); returns the run id."""
    import wandb

    session = client.get_session(session_id)
    run = wandb.init(project=project, mode=mode, dir=directory, config=_session_params(session),
                     name=f"{session['benchmark']}:{session['target']}", reinit="create_new")
    try:
        for step, row in session_steps(session, client.trajectory(session_id)):
            run.log(row, step=step)
        run.summary["evalplan.status"] = session.get("status")
        run.summary["evalplan.stop_reason"] = session.get("stop_reason")
        return str(run.id)
    finally:
        run.finish()


def log_prediction_wandb(prediction: dict[str, Any], *, coreset: str, model: str | None = None,
                         project: str = "evalplan", mode: WandbMode | None = None, directory: str | None = None) -> str:
    """Log a coreset's predicted full scores as the summary of a new W&B run; returns the run id."""
    import wandb

    run = wandb.init(project=project, mode=mode, dir=directory, name=f"coreset:{coreset}:{model or ''}",
                     config={"evalplan.coreset": coreset, "evalplan.model": model}, reinit="create_new")
    try:
        run.log(prediction_metrics(prediction), step=0)
        return str(run.id)
    finally:
        run.finish()
