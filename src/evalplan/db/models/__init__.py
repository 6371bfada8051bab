"""SQLAlchemy 2 ORM models, one module per owning domain (docs/ARCHITECTURE.md "Table ownership").

``evalplan.db.models.<owner>`` holds the tables the domain ``evalplan.<owner>`` owns (``kit``: the job
runtime); only that domain writes them, and other domains reach them through its ``repository.py``
(checked by tests/test_architecture.py). Every table is re-exported here, so ``from evalplan.db.models import
X`` names any of them, and importing this package registers all of them on ``Base.metadata`` (what Alembic's
``env.py`` compares against).
"""

from __future__ import annotations

from evalplan.db.models.auth import ApiToken, AuditEntry, Team
from evalplan.db.models.base import LOCAL_TEAM_ID, VISIBILITIES, Base, TeamOwned, utcnow
from evalplan.db.models.benchmark_selections import BenchmarkSelection
from evalplan.db.models.benchmarks import (
    PACKED_SCORES,
    Benchmark,
    BenchmarkModel,
    Item,
    ModelResponse,
    Score,
    ScoreRow,
    scores_view,
    view_metadata,
)
from evalplan.db.models.coresets import Coreset, CoresetItem, TrainedModel
from evalplan.db.models.embeddings import Embedding
from evalplan.db.models.hidden_states import HiddenState, HiddenStateChunk
from evalplan.db.models.kit import IdempotencyRecord, Job, JobInput, Worker
from evalplan.db.models.models import Model
from evalplan.db.models.sessions import EvalSession, SessionObservation, SessionPrior

__all__ = [
    "LOCAL_TEAM_ID", "PACKED_SCORES", "VISIBILITIES", "ApiToken", "AuditEntry", "Base", "Benchmark", "BenchmarkModel",
    "BenchmarkSelection", "Coreset", "CoresetItem", "Embedding", "EvalSession", "HiddenState", "HiddenStateChunk",
    "IdempotencyRecord", "Item", "Job", "JobInput", "Model", "ModelResponse", "Score", "ScoreRow", "SessionObservation",
    "SessionPrior", "Team", "TeamOwned", "TrainedModel", "Worker", "scores_view", "utcnow", "view_metadata",
]
