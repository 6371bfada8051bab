"""hidden states (chunked in the database) and cached trained models (RepCore, papers/003)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 21:32:24.712356
"""
import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('hidden_states',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('benchmark_id', sa.String(length=40), nullable=False),
    sa.Column('model_id', sa.String(length=40), nullable=False),
    sa.Column('n_items', sa.Integer(), nullable=False),
    sa.Column('dim', sa.Integer(), nullable=False),
    sa.Column('dtype', sa.String(length=10), nullable=False),
    sa.Column('item_pks', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['benchmark_id'], ['benchmarks.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('benchmark_id', 'model_id', name='uq_hidden_states_benchmark_model')
    )
    with op.batch_alter_table('hidden_states', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_hidden_states_model_id'), ['model_id'], unique=False)

    op.create_table('trained_models',
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=60), nullable=False),
    sa.Column('benchmark_id', sa.String(length=40), nullable=False),
    sa.Column('meta', sa.JSON(), nullable=False),
    sa.Column('blob', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['benchmark_id'], ['benchmarks.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('key')
    )
    with op.batch_alter_table('trained_models', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_trained_models_benchmark_id'), ['benchmark_id'], unique=False)

    op.create_table('hidden_state_chunks',
    sa.Column('hidden_state_id', sa.String(length=40), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('row_start', sa.Integer(), nullable=False),
    sa.Column('n_rows', sa.Integer(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['hidden_state_id'], ['hidden_states.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('hidden_state_id', 'seq')
    )


def downgrade() -> None:
    op.drop_table('hidden_state_chunks')
    with op.batch_alter_table('trained_models', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_trained_models_benchmark_id'))

    op.drop_table('trained_models')
    with op.batch_alter_table('hidden_states', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_hidden_states_model_id'))

    op.drop_table('hidden_states')
