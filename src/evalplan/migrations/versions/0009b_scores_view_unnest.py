"""scores view on PostgreSQL: unnest each packed row once instead of one array subscript per cell

Revision ID: h27b_scores_view_unnest
Revises: observation_probability
Create Date: 2026-12-05

``vals[i.position + 1]`` de-TOASTs the whole row for every cell (quadratic in the row length: minutes for a
21,000-item benchmark); ``unnest(vals) WITH ORDINALITY`` reads each row once. SQLite's ``json_each`` view already
reads each row once and is unchanged.
"""
from alembic import op

revision = 'h27b_scores_view_unnest'
down_revision = 'observation_probability'
branch_labels = None
depends_on = None

VIEW_UNNEST = """
CREATE VIEW scores AS
SELECT r.model_id, i.pk AS item_pk, r.metric, u.value
FROM score_rows r
CROSS JOIN LATERAL unnest(r.vals) WITH ORDINALITY AS u(value, ord)
JOIN items i ON i.benchmark_id = r.benchmark_id AND i.position = u.ord - 1
WHERE u.value <> 'NaN'::float8
"""
VIEW_SUBSCRIPT = """
CREATE VIEW scores AS
SELECT r.model_id, i.pk AS item_pk, r.metric, r.vals[i.position + 1] AS value
FROM score_rows r JOIN items i ON i.benchmark_id = r.benchmark_id
WHERE i.position < cardinality(r.vals) AND r.vals[i.position + 1] <> 'NaN'::float8
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("DROP VIEW scores")
        op.execute(VIEW_UNNEST)


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("DROP VIEW scores")
        op.execute(VIEW_SUBSCRIPT)
