"""Import every module that registers job handlers, so that any process can run any job."""

from app.services import backtests, benchmark_similarity, coresets, embeddings, imports, score_coresets, stats  # noqa: F401
