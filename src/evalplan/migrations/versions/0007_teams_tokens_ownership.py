"""teams, api_tokens, audit_log; team_id + visibility on every team-owned table; names unique per team;
curated coreset columns (provenance, published/deprecated)

Existing rows move to the built-in team ``local`` (id ``local``), private.

Revision ID: teams_tokens_ownership
Revises: h13a_runtime_hardening
Create Date: 2026-12-01 13:50:00
"""
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = 'teams_tokens_ownership'
down_revision = 'h13a_runtime_hardening'
branch_labels = None
depends_on = None

OWNED = ('benchmarks', 'models', 'jobs', 'coresets', 'eval_sessions', 'benchmark_selections')
# name of the old single-column unique constraint, per dialect (SQLite ones are unnamed: batch mode
# reflects them under this naming convention)
SQLITE_UQ = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def _old_unique(dialect: str, table: str) -> str:
    return f"uq_{table}_name" if dialect == "sqlite" else f"{table}_name_key"


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    teams = op.create_table(
        'teams',
        sa.Column('id', sa.String(length=40), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('name'),
    )
    op.bulk_insert(teams, [{"id": "local", "name": "local", "created_at": datetime.now(UTC)}])
    op.create_table(
        'api_tokens',
        sa.Column('id', sa.String(length=40), nullable=False),
        sa.Column('team_id', sa.String(length=40), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('token_hash', sa.String(length=64), nullable=False),
        sa.Column('scopes', sa.JSON(), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['team_id'], ['teams.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('token_hash'),
    )
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_tokens_team_id'), ['team_id'], unique=False)
    op.create_table(
        'audit_log',
        sa.Column('pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
        sa.Column('team_id', sa.String(length=40), nullable=False),
        sa.Column('actor', sa.String(length=200), nullable=False),
        sa.Column('token_id', sa.String(length=40), nullable=True),
        sa.Column('action', sa.String(length=40), nullable=False),
        sa.Column('resource_type', sa.String(length=40), nullable=False),
        sa.Column('resource_id', sa.String(length=40), nullable=False),
        sa.Column('detail', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('pk'),
    )
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.create_index('ix_audit_log_team_pk', ['team_id', 'pk'], unique=False)

    for table in OWNED:
        naming = SQLITE_UQ if dialect == "sqlite" else None
        with op.batch_alter_table(table, schema=None, naming_convention=naming) as batch_op:
            batch_op.add_column(sa.Column('team_id', sa.String(length=40), nullable=False,
                                          server_default=sa.text("'local'")))
            batch_op.add_column(sa.Column('visibility', sa.String(length=10), nullable=False,
                                          server_default=sa.text("'private'")))
            batch_op.create_index(batch_op.f(f'ix_{table}_team_id'), ['team_id'], unique=False)
            if table in ('benchmarks', 'models'):
                batch_op.drop_constraint(_old_unique(dialect, table), type_='unique')
                batch_op.create_unique_constraint(f'uq_{table}_team_name', ['team_id', 'name'])
        # the default only served the existing rows: a new row must name its team
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.alter_column('team_id', server_default=None)
            batch_op.alter_column('visibility', server_default=None)

    with op.batch_alter_table('coresets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('provenance', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('created_by', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('published_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('published_by', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('deprecated_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('deprecation_message', sa.Text(), nullable=True))
        batch_op.create_unique_constraint('uq_coresets_team_name_version', ['team_id', 'name', 'version'])


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    with op.batch_alter_table('coresets', schema=None) as batch_op:
        batch_op.drop_constraint('uq_coresets_team_name_version', type_='unique')
        for column in ('deprecation_message', 'deprecated_at', 'published_by', 'published_at', 'created_by',
                       'provenance'):
            batch_op.drop_column(column)
    for table in OWNED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            if table in ('benchmarks', 'models'):
                batch_op.drop_constraint(f'uq_{table}_team_name', type_='unique')
                batch_op.create_unique_constraint(_old_unique(dialect, table), ['name'])
            batch_op.drop_index(batch_op.f(f'ix_{table}_team_id'))
            batch_op.drop_column('visibility')
            batch_op.drop_column('team_id')
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_index('ix_audit_log_team_pk')
    op.drop_table('audit_log')
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_tokens_team_id'))
    op.drop_table('api_tokens')
    op.drop_table('teams')
