"""Import every module that registers job handlers, so that any process can run any job."""

from app.backtests import service as backtests  # noqa: F401
from app.benchmarks import stats  # noqa: F401
from app.coresets import service as coresets  # noqa: F401
from app.coresets.families import score_based  # noqa: F401
from app.embeddings import service as embeddings  # noqa: F401
from app.imports import service as imports  # noqa: F401
from app.similarity import service as similarity  # noqa: F401
