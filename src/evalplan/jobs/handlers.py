"""Import every module that registers job handlers, so that any process (API or worker) can run any job."""

from evalplan.backtests import sequential as sequential_backtest_tasks  # noqa: F401
from evalplan.backtests import tasks as backtest_tasks  # noqa: F401
from evalplan.benchmarks import tasks as benchmark_tasks  # noqa: F401
from evalplan.coresets import tasks as coreset_tasks  # noqa: F401
from evalplan.embeddings import tasks as embedding_tasks  # noqa: F401
from evalplan.imports import tasks as import_tasks  # noqa: F401
from evalplan.plans import tasks as plan_tasks  # noqa: F401
from evalplan.similarity import tasks as similarity_tasks  # noqa: F401
