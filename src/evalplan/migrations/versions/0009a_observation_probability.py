"""session observations record their draw's inclusion probability

Revision ID: observation_probability
Revises: h27_score_rows
Create Date: 2026-12-05

Issue 23: ``active_design`` draws each item at random with a probability it computes from what was observed
before the draw; the probability is stored with the observation (null for methods without a random design,
and for items the caller posted without their being proposed), so that the estimate can be recomputed from
the stored rows.
"""
import sqlalchemy as sa
from alembic import op

revision = 'observation_probability'
down_revision = 'h27_score_rows'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("session_observations") as batch:
        batch.add_column(sa.Column("probability", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("session_observations") as batch:
        batch.drop_column("probability")
