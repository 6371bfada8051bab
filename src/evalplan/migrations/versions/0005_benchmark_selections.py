"""benchmark-level selections with their Gaussian imputation model (paper 000 §4.4)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 22:16:13.297508
"""
import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('benchmark_selections',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('method', sa.String(length=40), nullable=False),
    sa.Column('k', sa.Integer(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('source', sa.String(length=20), nullable=False),
    sa.Column('metric', sa.String(length=200), nullable=True),
    sa.Column('benchmark_names', sa.JSON(), nullable=False),
    sa.Column('selected', sa.JSON(), nullable=False),
    sa.Column('gains', sa.JSON(), nullable=False),
    sa.Column('mean', sa.JSON(), nullable=False),
    sa.Column('scale', sa.JSON(), nullable=False),
    sa.Column('cov', sa.JSON(), nullable=False),
    sa.Column('ridge', sa.Float(), nullable=False),
    sa.Column('n_models', sa.Integer(), nullable=False),
    sa.Column('test_fraction', sa.Float(), nullable=False),
    sa.Column('diagnostics', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )


def downgrade() -> None:
    op.drop_table('benchmark_selections')
