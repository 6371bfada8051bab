"""Hidden-state coresets: RepCore (papers/003 §2.2-2.4): validation, the training/selection job, predictions.

The science is ``evalplan.core.repcore``; this module moves data between it and the database.
torch is imported only inside the job (through ``evalplan.core.repcore.alignment``), never by the API.

* validate: one benchmark; >= 2 source models (``reference_models``, a list or ``"all"``) with
  hidden states on every item and binary scores (default metric) on every item; budget <= N.
* job (``coreset``, queue ``gpu``): load states + correctness, train the alignment (or reuse the
  cached ``trained_models`` row with the same sha256 key), consensus embeddings, spherical k-means anchors.
* predict: ridge extrapolation over x_i = mean source correctness (eq. 6-8), LOO interval.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from typing import Any

import numpy as np
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalplan.benchmarks.repository import benchmark_one
from evalplan.core.coresets.intervals import extrapolation_flag
from evalplan.core.repcore.anchors import SphericalKMeansAnchors, consensus_embeddings
from evalplan.core.repcore.extrapolation import RepCoreExtrapolator
from evalplan.core.selection.base import ParamSpec
from evalplan.coresets.budget import plan_budget
from evalplan.coresets.curation import frozen_state
from evalplan.coresets.families.base import CoresetRequest, SelectionPlan, TargetScores
from evalplan.coresets.repository import (
    benchmark_and_models,
    hidden_states_of,
    load_for_job,
    model_scores_on,
    models_named,
    models_with_hidden_states,
    save_selection,
    store_trained_model,
    trained_model,
)
from evalplan.coresets.repository import item_pks as ordered_item_pks
from evalplan.db.models import Benchmark, Coreset, HiddenState, Model
from evalplan.hidden_states.repository import hidden_state_row, load_hidden_states
from evalplan.kit.errors import InvalidInput
from evalplan.kit.jobs import JobContext
from evalplan.kit.validation import check_params, finite_or_none
from evalplan.models.service import get_reference_models

METHOD = "repcore"
TRAINED_KIND = "repcore_alignment"
MIN_SOURCES = 2
INPUTS = ("embeddings", "correctness")
EXTRAPOLATION_TOLERANCE = 1e-12  # anchor means within this of the sources' range are inside it

PARAMS: dict[str, ParamSpec] = {
    "d_z": ParamSpec(int, "aligned embedding width (§2.2)", 32, minimum=1, maximum=4096),
    "epochs": ParamSpec(int, "maximum training epochs (early stopping on the validation split)", 100, minimum=1,
                        maximum=10000),
    "hidden": ParamSpec(int, "width of the shared MLP", 64, minimum=1, maximum=4096),
    "proj_dim": ParamSpec(int, "width of each source's projection", 128, minimum=1, maximum=4096),
    "lr": ParamSpec(float, "AdamW learning rate", 1e-3, minimum=0, exclusive_minimum=True),
    "weight_decay": ParamSpec(float, "weight decay", 1e-2, minimum=0),
    "patience": ParamSpec(int, "early-stopping patience (epochs)", 10, minimum=1, maximum=10000),
    "batch_size": ParamSpec(int, "items per batch", 256, minimum=1, maximum=65536),
    "standardize": ParamSpec(bool, "standardize each source's hidden states", True),
    "time_limit_s": ParamSpec(float, "stop training after this many seconds", None, minimum=0, exclusive_minimum=True,
                              nullable=True),
    "input": ParamSpec(str, "cluster the aligned hidden-state embeddings, or the sources' correctness patterns "
                       "(no training)", "embeddings", choices=INPUTS),
    "ridge_alpha": ParamSpec(float, "ridge penalty of the extrapolator (§2.4)", 1.0, minimum=0),
}
#: the parameters of the alignment training (and of its cache key); the others act after it
TRAINING_PARAMS = frozenset(PARAMS) - {"input", "ridge_alpha"}


class HiddenStateFamily:
    """Coresets from the source models' hidden states (RepCore, papers/003)."""

    name = "hidden_state"
    methods: tuple[str, ...] = (METHOD,)
    job_kind = "coreset"
    queue = "gpu"
    default_level = 0.95

    def check_params(self, method: str, params: dict[str, Any], seed: int, *,
                     field: str = "params") -> dict[str, Any]:
        """422 for unknown parameters or bad values (listing the valid ones); returns every parameter,
        defaults filled in and required floats as floats (the training cache key hashes them)."""
        given = check_params(PARAMS, params, method=method, field=field)
        return {name: float(given[name]) if name in given and spec.type is float and not spec.nullable
                else given.get(name, spec.default) for name, spec in PARAMS.items()}

    def validate(self, session: Session, request: CoresetRequest, benchmarks: list[Benchmark]) -> SelectionPlan:
        k, sources = validate_request(session, benchmarks, request.budget, request.reference_models)
        reference = request.reference_models if request.reference_models == "all" else [m.name for m in sources]
        return SelectionPlan(payload={"method": METHOD, "k": k, "sources": [m.id for m in sources]},
                             reference_models=reference, predictor=request.predictor)

    def select(self, ctx: JobContext, coreset_id: str) -> dict[str, Any]:
        return select_repcore_coreset(ctx, coreset_id, ctx.payload["k"], ctx.payload["sources"])

    def predict(self, session: Session, coreset: Coreset, scores: TargetScores, level: float) -> dict[str, Any]:
        return predict_repcore(session, coreset, scores.values, scores.model, level)

    def freeze(self, session: Session, coreset: Coreset) -> dict[str, Any]:
        """The sources' correctness on the items they all have scores for (eq. 6's x and the LOO interval)."""
        benchmark = benchmark_one(session, coreset.benchmark_ids[0])
        item_pks, correctness = source_correctness(session, coreset, benchmark)
        return {"sources": list((coreset.diagnostics or {}).get("source_models") or []),
                "item_pks": [int(pk) for pk in item_pks.tolist()], "correctness": correctness.tolist()}


HIDDEN_STATE = HiddenStateFamily()


# --------------------------------------------------------------------------- data access


def benchmark_item_pks(session: Session, benchmark: Benchmark) -> np.ndarray:
    return np.array(ordered_item_pks(session, benchmark.id), dtype=np.int64)


def correctness_matrix(session: Session, benchmark: Benchmark, model_ids: list[str],
                       item_pks: np.ndarray) -> np.ndarray:
    """Scores (default metric) of the models on the items, NaN where missing (models x items)."""
    col = {int(pk): j for j, pk in enumerate(item_pks.tolist())}
    row = {m: i for i, m in enumerate(model_ids)}
    values = np.full((len(model_ids), len(item_pks)), np.nan)
    for model_id, pk, value in model_scores_on(session, benchmark, model_ids):
        j = col.get(int(pk))
        if j is not None:
            values[row[model_id], j] = value
    return values


def _source_problems(session: Session, benchmark: Benchmark, models: list[Model], item_pks: np.ndarray) -> dict[str,
                                                                                                                str]:
    """Model name -> why it cannot be a RepCore source on the benchmark (absent when it can)."""
    states = {hs.model_id: hs for hs in hidden_states_of(session, benchmark.id, [m.id for m in models])}
    scores = correctness_matrix(session, benchmark, [m.id for m in models], item_pks)
    wanted = set(item_pks.tolist())
    problems: dict[str, str] = {}
    for i, model in enumerate(models):
        hs = states.get(model.id)
        if hs is None:
            problems[model.name] = "no hidden states on this benchmark"
            continue
        missing_states = len(wanted - set(np.frombuffer(hs.item_pks, dtype="<i8").tolist()))
        if missing_states:
            problems[model.name] = f"no hidden states for {missing_states} of the {len(wanted)} items"
            continue
        n_missing = int(np.isnan(scores[i]).sum())
        if n_missing == len(wanted):
            problems[model.name] = f"no scores (metric {benchmark.default_metric!r}) on this benchmark"
        elif n_missing:
            problems[model.name] = f"no scores for {n_missing} of the {len(wanted)} items"
        elif not np.isin(scores[i], (0.0, 1.0)).all():
            problems[model.name] = "scores are not binary (0/1 correctness)"
    return problems


# --------------------------------------------------------------------------- validation


def validate_request(session: Session, benchmarks: list[Benchmark], budget: Any,
                     reference_models: list[str] | str | None) -> tuple[int, list[Model]]:
    """Returns (K, source models in name order); 422 for anything RepCore cannot run on."""
    if len(benchmarks) != 1:
        raise InvalidInput(
            f"method 'repcore' selects on one benchmark per coreset; got {len(benchmarks)} "
            f"({', '.join(b.name for b in benchmarks)}): create one coreset per benchmark",
            [{"field": "benchmarks", "detail": "exactly one benchmark for repcore"}])
    benchmark = benchmarks[0]
    item_pks = benchmark_item_pks(session, benchmark)
    if len(item_pks) == 0:
        raise InvalidInput(f"benchmark {benchmark.name!r} has no items", [{"field": "benchmarks",
                                                                           "detail": "no items"}])
    plan = plan_budget(budget, [len(item_pks)], [benchmark.name], stratified=False)
    if reference_models is None:
        raise InvalidInput(
            f"method 'repcore' needs reference_models: the source models (a list or \"all\"), at least "
            f"{MIN_SOURCES} with hidden states and scores on {benchmark.name!r}",
            [{"field": "reference_models", "detail": f"at least {MIN_SOURCES} source models"}])
    if reference_models == "all":
        models = models_with_hidden_states(session, benchmark.id)
        problems = _source_problems(session, benchmark, models, item_pks)
        sources = [m for m in models if m.name not in problems]
    else:
        models = get_reference_models(session, reference_models)
        problems = _source_problems(session, benchmark, models, item_pks)
        if problems:
            raise InvalidInput(
                f"{len(problems)} reference model(s) cannot be RepCore sources on {benchmark.name!r}: "
                + "; ".join(f"{name}: {why}" for name, why in problems.items()),
                [{"field": "reference_models", "model": name, "detail": why} for name, why in problems.items()])
        sources = sorted(models, key=lambda m: m.name)
    if len(sources) < MIN_SOURCES:
        skipped = "; ".join(f"{n}: {why}" for n, why in problems.items())
        raise InvalidInput(
            f"method 'repcore' needs at least {MIN_SOURCES} source models with both hidden states and binary "
            f"scores on every item of {benchmark.name!r}; {len(sources)} qualify"
            + (f" ({', '.join(m.name for m in sources)})" if sources else "")
            + (f"; not usable: {skipped}" if skipped else ""),
            [{"field": "reference_models", "detail": f"at least {MIN_SOURCES} source models", "found": len(sources)}])
    return plan.total, sources


# --------------------------------------------------------------------------- the job


def training_key(benchmark: Benchmark, item_pks: np.ndarray, sources: list[Model], states: list[HiddenState],
                 params: dict[str, Any], seed: int) -> str:
    """sha256 of everything that determines the trained alignment."""
    spec = {
        "kind": TRAINED_KIND, "benchmark": benchmark.id, "data_version": benchmark.data_version,
        "metric": benchmark.default_metric,
        "items": hashlib.sha256(np.asarray(item_pks, dtype="<i8").tobytes()).hexdigest(),
        "sources": [m.id for m in sources],
        "hidden_states": [[hs.id, hs.created_at.isoformat() if hs.created_at else None] for hs in states],
        "params": {k: v for k, v in sorted(params.items()) if k in TRAINING_PARAMS}, "seed": seed,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _pack(state_bytes: bytes, embeddings: list[np.ndarray], test_auc: float) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, state=np.frombuffer(state_bytes, dtype=np.uint8),
             embeddings=np.stack([np.asarray(e, dtype=np.float32) for e in embeddings]),
             test_auc=np.array(test_auc, dtype=np.float64))
    return buf.getvalue()


def _unpack(blob: bytes) -> tuple[list[np.ndarray], float]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as data:
        return list(data["embeddings"]), float(data["test_auc"])


class _Progress:
    """Map the trainer's [0, 1] onto [lo, hi] of the job, writing at most every 0.5 s."""

    def __init__(self, ctx: JobContext, lo: float, hi: float) -> None:
        self.ctx, self.lo, self.hi, self.last = ctx, lo, hi, 0.0

    def __call__(self, fraction: float) -> None:
        now = time.monotonic()
        if fraction >= 1.0 or now - self.last >= 0.5:
            self.last = now
            self.ctx.progress(self.lo + (self.hi - self.lo) * float(fraction))


def select_repcore_coreset(ctx: JobContext, coreset_id: str, k: int, source_ids: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    coreset = load_for_job(ctx, coreset_id)
    params, seed = dict(coreset.params or {}), coreset.seed
    with ctx.session_factory() as session:
        benchmark, found = benchmark_and_models(session, coreset.benchmark_ids[0], source_ids)
        sources = [m for m in found if m is not None]
        if benchmark is None or len(sources) != len(found):
            raise InvalidInput("the coreset's benchmark or a source model was deleted")
        item_pks = benchmark_item_pks(session, benchmark)
        correctness = correctness_matrix(session, benchmark, source_ids, item_pks)
        if np.isnan(correctness).any():
            raise InvalidInput("a source model's scores changed since the coreset was requested: some are missing now")
        state_rows = [hs for hs in (hidden_state_row(session, benchmark, m) for m in sources) if hs is not None]
        if len(state_rows) != len(sources):
            raise InvalidInput("a source model's hidden states were deleted since the coreset was requested")
        key = training_key(benchmark, item_pks, sources, state_rows, params, seed)
        cached = trained_model(session, key) if params["input"] == "embeddings" else None
        cached_blob = bytes(cached.blob) if cached is not None else None
        states = None if cached is not None or params["input"] != "embeddings" else \
            [load_hidden_states(session, benchmark, m, item_pks) for m in sources]
        benchmark_id, benchmark_name = benchmark.id, benchmark.name
        source_names = [m.name for m in sources]
    ctx.progress(0.1)

    test_auc: float | None = None
    reused = False
    training: dict[str, Any] | None = None
    if params["input"] == "embeddings":
        if cached_blob is not None:
            embeddings, test_auc = _unpack(cached_blob)
            reused = True
        else:
            from evalplan.core.repcore.alignment import AlignmentTrainer  # torch: only ever imported in this job

            assert states is not None

            train_params = {k_: v for k_, v in params.items() if k_ in TRAINING_PARAMS}
            trainer = AlignmentTrainer(**train_params, seed=seed).fit(
                states, correctness, progress=_Progress(ctx, 0.1, 0.8))
            embeddings, test_auc = list(trainer.embeddings_), float(trainer.test_auc_)
            training = {"epochs": getattr(trainer, "n_epochs_", None),
                        "stop_reason": getattr(trainer, "stop_reason_", None),
                        "device": str(getattr(trainer, "device_", "")) or None}
            blob = _pack(trainer.state_dict_bytes(), embeddings, test_auc)
            del states, trainer
            with ctx.session_factory() as session:
                try:
                    store_trained_model(session, key=key, kind=TRAINED_KIND, benchmark_id=benchmark_id, blob=blob,
                                        meta={"test_auc": finite_or_none(test_auc), "sources": source_names,
                                              "params": train_params, "seed": seed})
                    session.commit()
                except IntegrityError:  # an identical job stored it first
                    session.rollback()
        X = consensus_embeddings(embeddings)
    else:
        X = correctness.T  # Table 4 ablation: raw 0/1 patterns, Euclidean k-means (evalplan.core.repcore.anchors)
    ctx.progress(0.85)

    anchors = SphericalKMeansAnchors(k, seed=seed, input=params["input"]).fit(X)
    ranking = np.asarray(anchors.ranking_, dtype=np.int64)
    gains = np.asarray(getattr(anchors, "gains_", np.full(len(ranking), np.nan)), dtype=float)
    weights = np.asarray(anchors.weights_, dtype=float)
    rows = [{"coreset_id": coreset_id, "rank": r + 1, "item_pk": int(item_pks[i]), "benchmark_id": benchmark_id,
             "gain": finite_or_none(gains[r]), "weight": finite_or_none(weights[r])}
            for r, i in enumerate(ranking.tolist())]
    diagnostics = {
        "k": k, "per_benchmark": {benchmark_id: len(rows)}, "n_items": int(len(item_pks)),
        "source_models": source_names, "input": params["input"], "test_auc": finite_or_none(test_auc),
        "reused_training": reused, "training_key": key if params["input"] == "embeddings" else None,
        "training": training, "seconds": round(time.perf_counter() - started, 3),
    }
    save_selection(ctx, coreset_id, rows, diagnostics)
    return {"coreset_id": coreset_id, "benchmark": benchmark_name, "n_items": len(rows),
            **{k_: v for k_, v in diagnostics.items() if k_ != "per_benchmark"}}


# --------------------------------------------------------------------------- predict


def source_correctness(session: Session, coreset: Coreset, benchmark: Benchmark) -> tuple[np.ndarray, np.ndarray]:
    """(item pks, sources x items correctness) over the items every source model has a score for, now;
    422 when fewer than two of the coreset's source models still exist."""
    names = list((coreset.diagnostics or {}).get("source_models") or [])
    models = models_named(session, names)
    by_name = {m.name: m for m in models}
    sources = [by_name[n] for n in names if n in by_name]
    if len(sources) < MIN_SOURCES:
        raise InvalidInput(f"fewer than {MIN_SOURCES} of this coreset's source models still exist",
                           [{"field": "coreset", "detail": f"sources: {names}"}])
    item_pks = benchmark_item_pks(session, benchmark)
    correctness = correctness_matrix(session, benchmark, [m.id for m in sources], item_pks)
    complete = ~np.isnan(correctness).any(axis=0)  # items every source has a score for
    return item_pks[complete], correctness[:, complete]


def predict_repcore(session: Session, coreset: Coreset, values: dict[int, float], model_name: str | None,
                    level: float) -> dict[str, Any]:
    """Eq. 6-8: ridge over x_i = mean source correctness from the target's anchor scores, LOO interval."""
    benchmark = benchmark_one(session, coreset.benchmark_ids[0])
    frozen = frozen_state(session, coreset)
    if frozen is not None:  # a published version: the sources' scores as they were at publish
        item_pks = np.asarray(frozen["item_pks"], dtype=np.int64)
        correctness = np.asarray(frozen["correctness"], dtype=float).reshape(len(frozen["sources"]), len(item_pks))
    else:
        item_pks, correctness = source_correctness(session, coreset, benchmark)
    position = {int(pk): j for j, pk in enumerate(item_pks.tolist())}
    observed = sorted((position[pk], v) for pk, v in values.items() if pk in position)
    if len(observed) < 2:
        raise InvalidInput("RepCore extrapolation needs the target's scores on at least 2 anchors; "
                           f"got {len(observed)}",
                           [{"field": "scores", "detail": "at least 2 anchor scores"}])
    anchor_idx = np.array([j for j, _ in observed], dtype=np.int64)
    y_anchor = np.array([v for _, v in observed], dtype=float)
    x = correctness.mean(axis=0)
    params = coreset.params or {}
    extrapolator = RepCoreExtrapolator(ridge_alpha=float(params.get("ridge_alpha", PARAMS["ridge_alpha"].default)))
    extrapolator.fit(anchor_idx, y_anchor, x)
    estimate = float(extrapolator.estimate_)
    lo, hi = extrapolator.loo_interval(anchor_idx, correctness, x, level=level)
    interval = [finite_or_none(lo), finite_or_none(hi)]
    source_means = correctness[:, anchor_idx].mean(axis=1)
    target_mean = float(y_anchor.mean())
    extrapolation = extrapolation_flag(target_mean, source_means, tolerance=EXTRAPOLATION_TOLERANCE)
    entry = {"estimate": estimate, "interval": interval, "std_error": None, "n_items": len(observed),
             "n_total": int(len(item_pks)), "method": "repcore_ridge"}
    capability = benchmark.capability or benchmark.name
    return {
        "coreset": coreset.id, "model": model_name, "level": level,
        "benchmarks": {benchmark.name: entry},
        "capabilities": {capability: {"estimate": estimate, "interval": interval, "std_error": None,
                                      "n_benchmarks": 1, "n_benchmarks_total": 1}},
        "overall": {"estimate": estimate, "interval": interval, "std_error": None, "n_benchmarks": 1,
                    "n_benchmarks_total": 1},
        "extrapolation": extrapolation, "agreement": None,
    }
