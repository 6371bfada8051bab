"""sequential sessions: eval_sessions, session_observations, session_priors (BayesAME, papers/004)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 21:13:15.901303
"""
import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('session_priors',
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('benchmark_id', sa.String(length=40), nullable=False),
    sa.Column('n_items', sa.Integer(), nullable=False),
    sa.Column('n_buckets', sa.Integer(), nullable=False),
    sa.Column('item_pks', sa.JSON(), nullable=False),
    sa.Column('blob', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['benchmark_id'], ['benchmarks.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('key')
    )
    with op.batch_alter_table('session_priors', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_session_priors_benchmark_id'), ['benchmark_id'], unique=False)

    op.create_table('eval_sessions',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('benchmark_id', sa.String(length=40), nullable=False),
    sa.Column('target', sa.String(length=300), nullable=True),
    sa.Column('targets', sa.JSON(), nullable=True),
    sa.Column('n_latent', sa.Integer(), nullable=True),
    sa.Column('reference_models', sa.JSON(), nullable=False),
    sa.Column('method', sa.String(length=40), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('stop_reason', sa.String(length=40), nullable=True),
    sa.Column('next_items', sa.JSON(), nullable=False),
    sa.Column('n_observed', sa.Integer(), nullable=False),
    sa.Column('estimate', sa.Float(), nullable=True),
    sa.Column('variance', sa.Float(), nullable=True),
    sa.Column('ci_lo', sa.Float(), nullable=True),
    sa.Column('ci_hi', sa.Float(), nullable=True),
    sa.Column('hyperparameters', sa.JSON(), nullable=True),
    sa.Column('target_state', sa.JSON(), nullable=True),
    sa.Column('prior_key', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['benchmark_id'], ['benchmarks.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['prior_key'], ['session_priors.key'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('eval_sessions', schema=None) as batch_op:
        batch_op.create_index('ix_eval_sessions_benchmark_target', ['benchmark_id', 'target'], unique=False)

    op.create_table('session_observations',
    sa.Column('session_id', sa.String(length=40), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('target_index', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('item_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('item_id', sa.String(length=200), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['eval_sessions.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', 'seq'),
    sa.UniqueConstraint('session_id', 'target_index', 'item_pk', name='uq_session_observations_item')
    )


def downgrade() -> None:
    op.drop_table('session_observations')
    with op.batch_alter_table('eval_sessions', schema=None) as batch_op:
        batch_op.drop_index('ix_eval_sessions_benchmark_target')

    op.drop_table('eval_sessions')
    with op.batch_alter_table('session_priors', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_session_priors_benchmark_id'))

    op.drop_table('session_priors')
