"""runtime hardening: job heartbeats and workers, idempotency records keyed by scope and path hash

Revision ID: h13a_runtime_hardening
Revises: 0006
Create Date: 2026-12-01

The idempotency table is recreated (its rows are a 24-hour replay cache; none survive the upgrade).
"""
import sqlalchemy as sa
from alembic import op

revision = 'h13a_runtime_hardening'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('worker_id', sa.String(length=200), nullable=True))
        batch.add_column(sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True))
        batch.create_index('ix_jobs_status', ['status'])
    op.create_table(
        'workers',
        sa.Column('id', sa.String(length=200), nullable=False),
        sa.Column('kind', sa.String(length=20), nullable=False),
        sa.Column('queues', sa.JSON(), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_workers_last_seen_at', 'workers', ['last_seen_at'])
    op.drop_table('idempotency_keys')
    op.create_table(
        'idempotency_keys',
        sa.Column('scope', sa.String(length=100), nullable=False),
        sa.Column('key', sa.String(length=200), nullable=False),
        sa.Column('method', sa.String(length=10), nullable=False),
        sa.Column('path_hash', sa.String(length=64), nullable=False),
        sa.Column('path', sa.Text(), nullable=False),
        sa.Column('request_hash', sa.String(length=64), nullable=False),
        sa.Column('status_code', sa.Integer(), nullable=True),
        sa.Column('content_type', sa.String(length=200), nullable=True),
        sa.Column('response_headers', sa.JSON(), nullable=True),
        sa.Column('response_body', sa.LargeBinary(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('scope', 'key', 'method', 'path_hash'),
    )
    op.create_index('ix_idempotency_keys_created_at', 'idempotency_keys', ['created_at'])


def downgrade() -> None:
    op.drop_index('ix_idempotency_keys_created_at', table_name='idempotency_keys')
    op.drop_table('idempotency_keys')
    op.create_table(
        'idempotency_keys',
        sa.Column('key', sa.String(length=200), nullable=False),
        sa.Column('method', sa.String(length=10), nullable=False),
        sa.Column('path', sa.String(length=500), nullable=False),
        sa.Column('request_hash', sa.String(length=64), nullable=False),
        sa.Column('status_code', sa.Integer(), nullable=True),
        sa.Column('content_type', sa.String(length=200), nullable=True),
        sa.Column('response_body', sa.LargeBinary(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('key', 'method', 'path'),
    )
    op.drop_index('ix_workers_last_seen_at', table_name='workers')
    op.drop_table('workers')
    with op.batch_alter_table('jobs') as batch:
        batch.drop_index('ix_jobs_status')
        batch.drop_column('heartbeat_at')
        batch.drop_column('worker_id')
