"""team-prefixed names: a benchmark or model name whose part before the first '/' is a team's name is renamed

Revision ID: team_prefixed_names
Revises: teams_tokens_ownership
Create Date: 2026-12-05

Issue 24: ``team/name`` always means that team's resource (``evalplan.auth.naming``), and new names may not
start with a team's name (``evalplan.auth.names``). A row stored before under such a name (another team's
``alpha/bench``, the hijack the probe showed) is renamed: its first ``/`` becomes ``--``
(``alpha--bench``), with ``-2``, ``-3``... when its team already has that name. The downgrade keeps
the new names (they are valid names either way).
"""
import sqlalchemy as sa
from alembic import op

revision = 'team_prefixed_names'
down_revision = 'teams_tokens_ownership'
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    teams = {name for (name,) in conn.execute(sa.text("SELECT name FROM teams"))} | {"local"}
    for table in ("benchmarks", "models"):
        rows = conn.execute(sa.text(f"SELECT id, team_id, name FROM {table} WHERE name LIKE '%/%'")).all()
        taken = {(team_id, name) for (team_id, name) in conn.execute(sa.text(f"SELECT team_id, name FROM {table}"))}
        for row_id, team_id, name in rows:
            if name.split("/", 1)[0] not in teams:
                continue
            base = name.replace("/", "--", 1)
            new, n = base, 1
            while (team_id, new) in taken:
                n += 1
                new = f"{base}-{n}"
            taken.add((team_id, new))
            conn.execute(sa.text(f"UPDATE {table} SET name = :name WHERE id = :id"), {"name": new, "id": row_id})


def downgrade() -> None:
    pass  # the renamed rows keep their new (valid) names
