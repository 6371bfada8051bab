"""``EvalplanClient``: one typed method per route of the v1 API (``../shared/design/API.md``).

Bodies and responses are the API's JSON as ``dict``s; ``{benchmark}``/``{model}``/``{coreset}`` take an id
or a name (``name@version`` for coresets). Every write carries an ``Idempotency-Key`` so retries are safe.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evalplan.client.transport import EvalplanError, Transport, multipart

API_VERSION = "v1"
"""The API version this client speaks (its paths are ``/v1/...``)."""

Json = dict[str, Any]
FileArg = str | Path | tuple[str, bytes]
"""A file to upload: a path, or ``(filename, content)``."""


def _q(part: str) -> str:
    return urllib.parse.quote(str(part), safe="@")


def _file(value: FileArg) -> tuple[str, bytes]:
    if isinstance(value, tuple):
        return value
    path = Path(value)
    return path.name, path.read_bytes()


def _body(**fields: Any) -> Json:
    return {k: v for k, v in fields.items() if v is not None}


class EvalplanClient:
    """A client of one Evalplan server.

    ``token`` (default ``$EVALPLAN_TOKEN``) is sent as ``Authorization: Bearer``; ``retries`` bounds the
    extra attempts on connection errors and 408/429/502/503/504.
    """

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, token: str | None = None, timeout: float = 60.0,
                 retries: int = 3, headers: dict[str, str] | None = None) -> None:
        self.transport = Transport(base_url, token=token, timeout=timeout, retries=retries, headers=headers)

    @property
    def base_url(self) -> str:
        return self.transport.base_url

    def request(self, method: str, path: str, body: Any = None, *, params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> Any:
        """Any route: JSON ``body`` in, decoded body out."""
        return self.transport.call(method, path, json_body=body, params=params, headers=headers)

    def _upload(self, path: str, fields: dict[str, Any], files: Iterable[FileArg], field: str = "files") -> Json:
        content, content_type = multipart(fields, [(field, *_file(f)) for f in files])
        result: Json = self.transport.call("POST", path, content=content, content_type=content_type)
        return result

    # ------------------------------------------------------------------ health
    def health(self) -> Json:
        return self.request("GET", "/health")

    def ready(self) -> Json:
        return self.request("GET", "/health/ready")

    # ------------------------------------------------------------------ teams and tokens
    def create_team(self, name: str) -> Json:
        return self.request("POST", "/v1/teams", {"name": name})

    def create_token(self, team: str, name: str, scopes: Sequence[str], expires_at: str | None = None) -> Json:
        return self.request("POST", f"/v1/teams/{_q(team)}/tokens",
                            _body(name=name, scopes=list(scopes), expires_at=expires_at))

    def revoke_token(self, team: str, token_id: str) -> None:
        self.request("DELETE", f"/v1/teams/{_q(team)}/tokens/{_q(token_id)}")

    def delete_team(self, team: str) -> None:
        """The bootstrap admin only: the team and everything it owns (409 while others depend on it)."""
        self.request("DELETE", f"/v1/teams/{_q(team)}")

    def set_visibility(self, kind: str, resource: str, visibility: str) -> Json:
        """``PATCH /v1/{kind}/{resource} {"visibility"}``; ``kind``: benchmarks, models, coresets, sessions,
        jobs or benchmark-selections."""
        return self.request("PATCH", f"/v1/{kind}/{_q(resource)}", {"visibility": visibility})

    # ------------------------------------------------------------------ benchmarks, items, scores
    def create_benchmark(self, name: str, **fields: Any) -> Json:
        """``fields``: capability, description, embedding_fields, score_kind, score_min, score_max, visibility..."""
        return self.request("POST", "/v1/benchmarks", _body(name=name, **fields))

    def list_benchmarks(self, **params: Any) -> Json:
        return self.request("GET", "/v1/benchmarks", params=params)

    def get_benchmark(self, benchmark: str) -> Json:
        return self.request("GET", f"/v1/benchmarks/{_q(benchmark)}")

    def update_benchmark(self, benchmark: str, **fields: Any) -> Json:
        return self.request("PATCH", f"/v1/benchmarks/{_q(benchmark)}", fields)

    def upload_items(self, benchmark: str, items: Sequence[Mapping[str, Any]]) -> Json:
        """Items ``{id, prompt, target?, fields?}``; returns ``{created, updated}``."""
        return self.request("POST", f"/v1/benchmarks/{_q(benchmark)}/items", list(items))

    def list_items(self, benchmark: str, **params: Any) -> Json:
        return self.request("GET", f"/v1/benchmarks/{_q(benchmark)}/items", params=params)

    def item_responses(self, benchmark: str, item: str, **params: Any) -> Json:
        """The models' stored responses on one item (``model``, ``limit``, ``cursor``); imports store them."""
        return self.request("GET", f"/v1/benchmarks/{_q(benchmark)}/items/{_q(item)}/responses", params=params)

    def upload_scores(self, benchmark: str, scores: Sequence[Mapping[str, Any]] | str,
                      metric: str | None = None) -> Json:
        """``[{model, item, score}]`` as JSON, or a wide CSV string; returns ``{n_scores, n_models, n_items}``."""
        path = f"/v1/benchmarks/{_q(benchmark)}/scores"
        if isinstance(scores, str):
            result: Json = self.transport.call("POST", path, content=scores.encode(), content_type="text/csv",
                                               params={"metric": metric})
            return result
        return self.request("POST", path, list(scores), params={"metric": metric})

    def scores_csv(self, benchmark: str, metric: str | None = None) -> str:
        text: str = self.transport.call("GET", f"/v1/benchmarks/{_q(benchmark)}/scores", params={"metric": metric},
                                        accept="text/csv")
        return text

    def list_scores(self, benchmark: str, **params: Any) -> Json:
        return self.request("GET", f"/v1/benchmarks/{_q(benchmark)}/scores", params=params)

    def benchmark_stats(self, benchmark: str, **params: Any) -> Json:
        return self.request("GET", f"/v1/benchmarks/{_q(benchmark)}/stats", params=params)

    def upload_hidden_states(self, benchmark: str, model: str, file: FileArg, **fields: Any) -> Json:
        return self._upload(f"/v1/benchmarks/{_q(benchmark)}/hidden-states", {"model": model, **fields}, [file], "file")

    def list_hidden_states(self, benchmark: str) -> Json:
        return self.request("GET", f"/v1/benchmarks/{_q(benchmark)}/hidden-states")

    def delete_hidden_states(self, benchmark: str, model: str) -> None:
        self.request("DELETE", f"/v1/benchmarks/{_q(benchmark)}/hidden-states/{_q(model)}")

    # ------------------------------------------------------------------ models
    def create_model(self, name: str, family: str | None = None, metadata: dict[str, Any] | None = None) -> Json:
        return self.request("POST", "/v1/models", _body(name=name, family=family, metadata=metadata))

    def list_models(self, **params: Any) -> Json:
        return self.request("GET", "/v1/models", params=params)

    def get_model(self, model: str) -> Json:
        return self.request("GET", f"/v1/models/{urllib.parse.quote(model, safe='/')}")

    # ------------------------------------------------------------------ imports
    def import_lm_eval(self, model: str, files: Iterable[FileArg], metric: str | None = None,
                       filter: str | None = None) -> Json:  # noqa: A002 - the form field's name
        return self._upload("/v1/imports/lm-eval", {"model": model, "metric": metric, "filter": filter}, files)

    def import_inspect(self, files: Iterable[FileArg], *, model: str | None = None, benchmark: str | None = None,
                       scorer: str | None = None) -> Json:
        return self._upload("/v1/imports/inspect", {"model": model, "benchmark": benchmark, "scorer": scorer}, files)

    def import_helm(self, files: Iterable[FileArg], *, model: str | None = None, benchmark: str | None = None,
                    stat: str | None = None, perturbed: bool | None = None) -> Json:
        return self._upload("/v1/imports/helm", {"model": model, "benchmark": benchmark, "stat": stat,
                                                 "perturbed": perturbed}, files)

    def import_lighteval(self, files: Iterable[FileArg], *, model: str | None = None, benchmark: str | None = None,
                         metric: str | None = None, split: str | None = None) -> Json:
        return self._upload("/v1/imports/lighteval", {"model": model, "benchmark": benchmark, "metric": metric,
                                                      "split": split}, files)

    # ------------------------------------------------------------------ jobs
    def get_job(self, job_id: str) -> Json:
        return self.request("GET", f"/v1/jobs/{_q(job_id)}")

    def list_jobs(self, **params: Any) -> Json:
        return self.request("GET", "/v1/jobs", params=params)

    def cancel_job(self, job_id: str) -> Json:
        return self.request("POST", f"/v1/jobs/{_q(job_id)}/cancel")

    def wait_job(self, job_id: str, timeout: float = 600.0, poll: float = 0.5) -> Json:
        """Poll until the job is final; a failed or cancelled job raises ``EvalplanError`` (status 0)."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            job = self.get_job(job_id)
            if job["status"] == "succeeded":
                return job
            if job["status"] in ("failed", "cancelled"):
                raise EvalplanError(0, job.get("error") if isinstance(job.get("error"), dict) else None,
                                    f"job {job_id} {job['status']}: {job.get('error')}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {job['status']} after {timeout}s")
            time.sleep(poll)

    def job_plot(self, job_id: str, fmt: str = "svg") -> str | bytes:
        return self.transport.call("GET", f"/v1/jobs/{_q(job_id)}/plot.{fmt}", accept="*/*")

    # ------------------------------------------------------------------ embeddings, similarity, selections, backtests
    def embed(self, **body: Any) -> Json:
        return self.request("POST", "/v1/embeddings", body)

    def benchmark_similarity(self, **params: Any) -> Json:
        return self.request("GET", "/v1/benchmark-similarity", params=params)

    def create_benchmark_selection(self, **body: Any) -> Json:
        return self.request("POST", "/v1/benchmark-selections", body)

    def get_benchmark_selection(self, selection_id: str) -> Json:
        return self.request("GET", f"/v1/benchmark-selections/{_q(selection_id)}")

    def predict_benchmark_selection(self, selection_id: str, **body: Any) -> Json:
        return self.request("POST", f"/v1/benchmark-selections/{_q(selection_id)}/predict", body)

    def backtest(self, **body: Any) -> Json:
        return self.request("POST", "/v1/backtests", body)

    def plan(self, benchmarks: Sequence[str], half_width: float, **body: Any) -> Json:
        return self.request("POST", "/v1/plans", {"benchmarks": list(benchmarks), "half_width": half_width, **body})

    # ------------------------------------------------------------------ coresets
    def create_coreset(self, method: str, benchmarks: Sequence[str], budget: int | dict[str, float],
                       **body: Any) -> Json:
        """``202 {coreset, job}``; ``body``: name, reference_models, predictor, params, seed..."""
        return self.request("POST", "/v1/coresets",
                            {"method": method, "benchmarks": list(benchmarks), "budget": budget, **body})

    def list_coresets(self, **params: Any) -> Json:
        return self.request("GET", "/v1/coresets", params=params)

    def get_coreset(self, coreset: str) -> Json:
        return self.request("GET", f"/v1/coresets/{_q(coreset)}")

    def update_coreset(self, coreset: str, **fields: Any) -> Json:
        return self.request("PATCH", f"/v1/coresets/{_q(coreset)}", fields)

    def delete_coreset(self, coreset: str) -> None:
        self.request("DELETE", f"/v1/coresets/{_q(coreset)}")

    def publish_coreset(self, coreset: str) -> Json:
        return self.request("POST", f"/v1/coresets/{_q(coreset)}/publish")

    def diff_coresets(self, coreset: str, against: str) -> Json:
        return self.request("GET", f"/v1/coresets/{_q(coreset)}/diff", params={"against": against})

    def export_coreset(self, coreset: str, format: str = "jsonl") -> Any:  # noqa: A002 - the query parameter
        """``jsonl``/``csv`` as text, ``lm-eval``/``inspect`` (and the other JSON formats) decoded."""
        return self.transport.call("GET", f"/v1/coresets/{_q(coreset)}/export", params={"format": format},
                                   accept="*/*")

    def predict_coreset(self, coreset: str, scores: Sequence[Mapping[str, Any]], model: str | None = None) -> Json:
        """``scores``: ``[{benchmark, item, score}]``; returns per-benchmark and overall estimates with intervals."""
        return self.request("POST", f"/v1/coresets/{_q(coreset)}/predict", _body(model=model, scores=list(scores)))

    def coreset_plot(self, coreset: str, fmt: str = "svg") -> str | bytes:
        return self.transport.call("GET", f"/v1/coresets/{_q(coreset)}/plot.{fmt}", accept="*/*")

    # ------------------------------------------------------------------ sessions
    def create_session(self, benchmark: str, target: str, **fields: Any) -> Json:
        """``fields`` are ``POST /v1/sessions`` fields (reference_models, method, stop, max_items, seed, ...)."""
        return self.request("POST", "/v1/sessions", _body(benchmark=benchmark, target=target, **fields))

    def observe(self, session_id: str, item: str, score: float) -> Json:
        """Post one score; returns the updated session."""
        return self.request("POST", f"/v1/sessions/{_q(session_id)}/observations", {"item": item, "score": score})

    def observe_many(self, session_id: str, observations: Iterable[tuple[str, float]]) -> Json:
        """Post several scores at once (all-or-nothing); returns the updated session."""
        return self.request("POST", f"/v1/sessions/{_q(session_id)}/observations",
                            {"observations": [{"item": i, "score": s} for i, s in observations]})

    def get_session(self, session_id: str) -> Json:
        return self.request("GET", f"/v1/sessions/{_q(session_id)}")

    def list_sessions(self, **params: Any) -> Json:
        return self.request("GET", "/v1/sessions", params=params)

    def trajectory(self, session_id: str) -> list[Json]:
        result: list[Json] = self.request("GET", f"/v1/sessions/{_q(session_id)}/trajectory")
        return result

    def observations(self, session_id: str, **params: Any) -> Json:
        return self.request("GET", f"/v1/sessions/{_q(session_id)}/observations", params=params)

    def compare_sessions(self, sessions: Sequence[str], level: float | None = None) -> Json:
        """``POST /v1/comparisons``: the sessions side by side and, for each later session B against the
        first A, the paired difference B - A on the items both observed (``pairs[i].paired.verdict``:
        ``b_better``, ``a_better`` or ``undecided`` at ``level``, default 0.95)."""
        return self.request("POST", "/v1/comparisons", _body(sessions=list(sessions), level=level))

    def leaderboard(self, benchmarks: Sequence[str], **params: Any) -> Json:
        """``GET /v1/leaderboard``: a page of models x ``benchmarks`` (params: sort, order, level, limit, cursor)."""
        return self.request("GET", "/v1/leaderboard", params={"benchmarks": ",".join(benchmarks), **params})

    def session_plot(self, session_id: str, fmt: str = "svg") -> str | bytes:
        return self.transport.call("GET", f"/v1/sessions/{_q(session_id)}/plot.{fmt}", accept="*/*")
