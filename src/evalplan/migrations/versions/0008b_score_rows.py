"""score rows: one packed row per (benchmark, model, metric) instead of one row per cell; items get a dense position

Revision ID: h27_score_rows
Revises: team_prefixed_names
Create Date: 2026-12-05

``items.position`` is the item's dense index in its benchmark (creation order = pk order). ``score_rows.vals``
holds a model's scores at those positions (PostgreSQL ``double precision[]`` with NaN for missing, stored
uncompressed; SQLite a JSON array with null for missing). ``scores`` becomes a read-only view of the present
cells with the old columns. Data is converted both ways, one benchmark at a time. ``session_priors.derived``
stores what the estimators derived from a prior (features, calibration curves), shared by every API worker.
"""
import json
import math
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = 'h27_score_rows'
down_revision = 'team_prefixed_names'
branch_labels = None
depends_on = None

PACKED = sa.Text().with_variant(postgresql.ARRAY(postgresql.DOUBLE_PRECISION()), 'postgresql')

VIEW_POSTGRESQL = """
CREATE VIEW scores AS
SELECT r.model_id, i.pk AS item_pk, r.metric, r.vals[i.position + 1] AS value
FROM score_rows r JOIN items i ON i.benchmark_id = r.benchmark_id
WHERE i.position < cardinality(r.vals) AND r.vals[i.position + 1] <> 'NaN'::float8
"""
VIEW_SQLITE = """
CREATE VIEW scores AS
SELECT r.model_id AS model_id, i.pk AS item_pk, r.metric AS metric, j.value AS value
FROM score_rows r JOIN json_each(r.vals) j JOIN items i ON i.benchmark_id = r.benchmark_id AND i.position = j.key
WHERE j.type IN ('real', 'integer')
"""


def _encode(values: list[float], postgres: bool) -> Any:
    if postgres:
        return values
    return json.dumps([None if math.isnan(v) else v for v in values])


def _decode(vals: Any) -> list[float | None]:
    if isinstance(vals, str):
        return list(json.loads(vals))
    return [None if v is None or math.isnan(v) else float(v) for v in vals]


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == 'postgresql'
    if postgres:
        op.add_column('items', sa.Column('position', sa.Integer(), nullable=True))
    else:  # SQLite adds a NOT NULL column only with a default; the unique index below catches a forgotten one
        op.add_column('items', sa.Column('position', sa.Integer(), nullable=False, server_default='0'))
    op.execute("UPDATE items SET position = (SELECT COUNT(*) FROM items o WHERE o.benchmark_id = items.benchmark_id "
               "AND o.pk < items.pk)")
    if postgres:
        op.alter_column('items', 'position', nullable=False)
    op.create_index('uq_items_benchmark_position', 'items', ['benchmark_id', 'position'], unique=True)
    op.add_column('session_priors', sa.Column('derived', sa.LargeBinary(), nullable=True))
    op.create_table(
        'score_rows',
        sa.Column('benchmark_id', sa.String(length=40), nullable=False),
        sa.Column('model_id', sa.String(length=40), nullable=False),
        sa.Column('metric', sa.String(length=200), nullable=False),
        sa.Column('n_scores', sa.Integer(), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('vals', PACKED, nullable=False),
        sa.ForeignKeyConstraint(['benchmark_id'], ['benchmarks.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['model_id'], ['models.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('benchmark_id', 'model_id', 'metric'),
    )
    op.create_index('ix_score_rows_model', 'score_rows', ['model_id'])
    if postgres:  # rows are read whole: no compression pass on write or read
        op.execute("ALTER TABLE score_rows ALTER COLUMN vals SET STORAGE EXTERNAL")
    rows_table = sa.table('score_rows', sa.column('benchmark_id', sa.String), sa.column('model_id', sa.String),
                          sa.column('metric', sa.String), sa.column('n_scores', sa.Integer),
                          sa.column('version', sa.Integer), sa.column('vals', PACKED))
    benchmarks = bind.execute(sa.text("SELECT benchmark_id, COUNT(*) FROM items GROUP BY benchmark_id")).all()
    for benchmark_id, n_items in benchmarks:
        cells: dict[tuple[str, str], list[float]] = {}
        for model_id, metric, position, value in bind.execute(sa.text(
                "SELECT s.model_id, s.metric, i.position, s.value FROM scores s JOIN items i ON i.pk = s.item_pk "
                "WHERE i.benchmark_id = :b"), {"b": benchmark_id}):
            row = cells.setdefault((model_id, metric), [math.nan] * int(n_items))
            row[int(position)] = float(value)
        rows = [{"benchmark_id": benchmark_id, "model_id": m, "metric": k, "version": 1,
                 "n_scores": sum(1 for v in vals if not math.isnan(v)), "vals": _encode(vals, postgres)}
                for (m, k), vals in cells.items()]
        if rows:
            bind.execute(sa.insert(rows_table), rows)
    op.drop_index('ix_scores_item_pk', table_name='scores')
    op.drop_table('scores')
    op.execute(VIEW_POSTGRESQL if postgres else VIEW_SQLITE)


def downgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == 'postgresql'
    op.execute("DROP VIEW scores")
    op.create_table(
        'scores',
        sa.Column('model_id', sa.String(length=40), nullable=False),
        sa.Column('item_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
        sa.Column('metric', sa.String(length=200), nullable=False),
        sa.Column('value', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('model_id', 'item_pk', 'metric'),
    )
    op.create_index('ix_scores_item_pk', 'scores', ['item_pk'])
    scores_table = sa.table('scores', sa.column('model_id', sa.String), sa.column('item_pk', sa.BigInteger),
                            sa.column('metric', sa.String), sa.column('value', sa.Float))
    benchmark_ids = [b for (b,) in bind.execute(sa.text("SELECT DISTINCT benchmark_id FROM score_rows"))]
    for benchmark_id in benchmark_ids:
        pk_at: dict[int, int] = dict(bind.execute(sa.text("SELECT position, pk FROM items WHERE benchmark_id = :b"),
                                  {"b": benchmark_id}).all())
        cells = []
        for model_id, metric, vals in bind.execute(sa.text(
                "SELECT model_id, metric, vals FROM score_rows WHERE benchmark_id = :b"), {"b": benchmark_id}):
            for position, value in enumerate(_decode(vals)):
                if value is not None and position in pk_at:
                    cells.append({"model_id": model_id, "item_pk": pk_at[position], "metric": metric,
                                  "value": float(value)})
        if cells:
            bind.execute(sa.insert(scores_table), cells)
    op.drop_index('ix_score_rows_model', table_name='score_rows')
    op.drop_table('score_rows')
    op.drop_index('uq_items_benchmark_position', table_name='items')
    if postgres:
        op.drop_column('session_priors', 'derived')
    else:
        op.execute("ALTER TABLE session_priors DROP COLUMN derived")
    if postgres:
        op.drop_column('items', 'position')
    else:
        op.execute("ALTER TABLE items DROP COLUMN position")
