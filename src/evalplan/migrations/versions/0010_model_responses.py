"""model responses: what a model answered on an item, from harness imports

Revision ID: model_responses
Revises: h27b_scores_view_unnest
Create Date: 2026-12-06

Issue 26 item 3: the harness imports (lm-eval, inspect_ai, HELM, lighteval) parse each sample's model output;
``model_responses`` keeps it, one row per (item, model), replaced by a re-import. Its foreign keys cascade:
deleting the item, the model or the benchmark deletes the responses. A new table: nothing to convert.
"""
import sqlalchemy as sa
from alembic import op

revision = 'model_responses'
down_revision = 'h27b_scores_view_unnest'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'model_responses',
        sa.Column('item_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
        sa.Column('model_id', sa.String(length=40), nullable=False),
        sa.Column('benchmark_id', sa.String(length=40), nullable=False),
        sa.Column('response', sa.Text(), nullable=False),
        sa.Column('truncated', sa.Boolean(), nullable=False),
        sa.Column('n_chars', sa.Integer(), nullable=False),
        sa.Column('source', sa.String(length=40), nullable=False),
        sa.Column('extra', sa.JSON(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['item_pk'], ['items.pk'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['model_id'], ['models.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['benchmark_id'], ['benchmarks.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('item_pk', 'model_id'),
    )
    op.create_index('ix_model_responses_model', 'model_responses', ['model_id'])
    op.create_index('ix_model_responses_benchmark_model', 'model_responses', ['benchmark_id', 'model_id'])


def downgrade() -> None:
    op.drop_index('ix_model_responses_benchmark_model', table_name='model_responses')
    op.drop_index('ix_model_responses_model', table_name='model_responses')
    op.drop_table('model_responses')
