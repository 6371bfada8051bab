"""Import every module that registers job handlers, so that any process (API or worker) can run any job."""

from app.backtests import sequential as sequential_backtest_tasks  # noqa: F401
from app.backtests import tasks as backtest_tasks  # noqa: F401
from app.benchmarks import tasks as benchmark_tasks  # noqa: F401
from app.coresets import tasks as coreset_tasks  # noqa: F401
from app.embeddings import tasks as embedding_tasks  # noqa: F401
from app.imports import tasks as import_tasks  # noqa: F401
from app.plans import tasks as plan_tasks  # noqa: F401
from app.similarity import tasks as similarity_tasks  # noqa: F401
