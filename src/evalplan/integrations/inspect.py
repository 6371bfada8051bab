"""Adaptive inspect_ai evals: an inspect ``SampleSource`` that drives an Evalplan sequential session.

``Task(dataset=evalplan_source(dataset, url=..., benchmark=..., target=...), solver=..., scorer=...)``
opens a session (``POST /v1/sessions``), runs exactly the samples the session proposes (``next_items``, in
its batches), posts each sample's score as it completes (``value_to_float`` of the scorer's value), and
ends the task when the session stops. The inspect log then holds exactly the evaluated samples; each
sample's ``metadata["evalplan"]`` records the session after its score was posted (id, n_observed,
estimate, ci, status, stop_reason), so the last one holds the final estimate; ``source.session`` holds it too.
Needs inspect_ai >= 0.3.250 (the ``SampleSource`` hook): ``pip install 'evalplan[inspect]'``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio
from inspect_ai import SampleSource
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalSample
from inspect_ai.scorer import value_to_float

from evalplan.client import EvalplanClient

SUMMARY_KEYS = ("id", "n_observed", "estimate", "ci", "level", "status", "stop_reason", "method")


class EvalplanSampleSource(SampleSource):
    """The ``SampleSource`` behind :func:`evalplan_source` (one session per task run)."""

    def __init__(self, dataset: Iterable[Sample], client: EvalplanClient, benchmark: str, target: str,
                 scorer: str | None, session_fields: dict[str, Any]) -> None:
        self.samples: dict[str, Sample] = {}
        for sample in dataset:
            if sample.id is None:
                raise ValueError("evalplan_source needs samples with ids: the id is the Evalplan item id")
            self.samples[str(sample.id)] = sample
        self.client = client
        self.benchmark = benchmark
        self.target = target
        self.scorer = scorer
        self.session_fields = session_fields
        self.session: dict[str, Any] | None = None
        self.posted: dict[str, float] = {}
        self.failed: set[str] = set()
        self._to_float = value_to_float()
        self._summary: dict[str, Any] = {"benchmark": benchmark, "target": target}
        self.metadata: dict[str, Any] = {"evalplan": self._summary}
        """Pass as ``Task(metadata=source.metadata)``: the log's ``eval.metadata["evalplan"]`` then holds the
        final session (inspect copies the dict at the start but keeps this nested one, updated in place)."""

    def summary(self) -> dict[str, Any]:
        return {k: (self.session or {}).get(k) for k in SUMMARY_KEYS}

    def _update(self, session: dict[str, Any]) -> None:
        self.session = session
        self._summary.update({"session_id": session.get("id"), **self.summary()})

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        result: dict[str, Any] = await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
        return result

    def _proposed(self) -> list[Sample]:
        assert self.session is not None
        out = []
        for item in self.session.get("next_items") or []:
            if item in self.posted or item in self.failed:
                continue
            if item not in self.samples:
                raise KeyError(f"session {self.session['id']} proposes item {item!r}, which the dataset lacks")
            out.append(self.samples[item])
        return out

    async def next_samples(self) -> list[Sample] | None:
        if self.session is None:
            self._update(await self._call(self.client.create_session, self.benchmark, self.target,
                                          **self.session_fields))
        else:
            self._update(await self._call(self.client.get_session, self.session["id"]))
        assert self.session is not None
        if self.session["status"] == "stopped":
            return None
        batch = self._proposed()
        return batch or None

    async def sample_complete(self, sample: EvalSample) -> list[Sample] | None:
        item = str(sample.id)
        if self.session is None or item in self.posted:
            return None
        scores = sample.scores or {}
        name = self.scorer or next(iter(scores), None)
        if sample.error is not None or name is None or name not in scores:
            self.failed.add(item)
            return None
        value = float(self._to_float(scores[name].value))
        self._update(await self._call(self.client.observe, self.session["id"], item, value))
        self.posted[item] = value
        return None


def evalplan_source(dataset: Iterable[Sample], *, url: str, benchmark: str, target: str, token: str | None = None,
                    scorer: str | None = None, client: EvalplanClient | None = None,
                    **session_fields: Any) -> EvalplanSampleSource:
    """An inspect ``SampleSource`` running the samples an Evalplan session proposes (see the module doc).

    ``dataset``: the samples (ids = the benchmark's item ids); ``session_fields``: ``POST /v1/sessions``
    fields (``stop``, ``max_items``, ``method``, ``reference_models``, ``seed``...); ``scorer``: whose value
    is posted (default the first); ``token``: default ``$EVALPLAN_TOKEN``.
    """
    return EvalplanSampleSource(dataset, client or EvalplanClient(url, token=token), benchmark, target, scorer,
                                session_fields)
