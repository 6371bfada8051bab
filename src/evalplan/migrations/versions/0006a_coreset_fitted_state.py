"""coresets.fitted_state: the score-based predictor state, moved out of diagnostics["fits"]

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 23:05:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

# Lightweight table for the data migration (never the ORM model: it moves on with later revisions).
coresets = sa.table(
    'coresets',
    sa.column('id', sa.String(length=40)),
    sa.column('diagnostics', sa.JSON()),
    sa.column('fitted_state', sa.JSON()),
)


def _fits_summary(fits: dict) -> dict:
    return {bid: {"n_items": fit.get("n_items"), "k": len(fit.get("items") or []), "lambda": fit.get("lambda"),
                  "n_references": len(fit.get("y_ref") or [])}
            for bid, fit in fits.items() if isinstance(fit, dict)}


def upgrade() -> None:
    with op.batch_alter_table('coresets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('fitted_state', sa.JSON(), nullable=True))

    conn = op.get_bind()
    rows = conn.execute(sa.select(coresets.c.id, coresets.c.diagnostics)
                        .where(coresets.c.diagnostics.isnot(None))).all()
    for coreset_id, diagnostics in rows:
        if not isinstance(diagnostics, dict) or "fits" not in diagnostics:
            continue
        diagnostics = dict(diagnostics)
        fits = diagnostics.pop("fits")
        if isinstance(fits, dict):
            diagnostics["fits_summary"] = _fits_summary(fits)
        conn.execute(sa.update(coresets).where(coresets.c.id == coreset_id)
                     .values(diagnostics=diagnostics, fitted_state={"fits": fits}))


def downgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.select(coresets.c.id, coresets.c.diagnostics, coresets.c.fitted_state)
                        .where(coresets.c.fitted_state.isnot(None))).all()
    for coreset_id, diagnostics, fitted_state in rows:
        if not isinstance(fitted_state, dict) or "fits" not in fitted_state:
            continue
        diagnostics = dict(diagnostics or {})
        diagnostics.pop("fits_summary", None)
        diagnostics["fits"] = fitted_state["fits"]
        conn.execute(sa.update(coresets).where(coresets.c.id == coreset_id).values(diagnostics=diagnostics))

    with op.batch_alter_table('coresets', schema=None) as batch_op:
        batch_op.drop_column('fitted_state')
