"""Alembic: upgrade head, downgrade base, upgrade head again, on fresh SQLite and PostgreSQL databases."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from evalplan.db.migrate import alembic_config, downgrade, upgrade
from evalplan.db.models import Base, view_metadata
from evalplan.kit.db import make_engine

MIGR_DB = "evalplan_migr_test"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'migr.db'}"


@pytest.fixture
def postgres_url(services) -> Iterator[str]:
    admin = make_engine(services.admin_pg_url).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {MIGR_DB} WITH (FORCE)"))
        conn.execute(text(f"CREATE DATABASE {MIGR_DB}"))
    try:
        yield make_url(services.admin_pg_url).set(database=MIGR_DB).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {MIGR_DB} WITH (FORCE)"))
        admin.dispose()


def head_revision(url: str) -> str:
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    assert head is not None
    return head


def schema_of(url: str) -> dict[str, set[str]]:
    """Table name -> column names, as the database reports them."""
    engine = make_engine(url)
    try:
        insp = inspect(engine)
        return {t: {c["name"] for c in insp.get_columns(t)} for t in insp.get_table_names()}
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def drift(url: str) -> list:
    """What Alembic's autogenerate would still change to reach the models' metadata."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return compare_metadata(MigrationContext.configure(conn), Base.metadata)
    finally:
        engine.dispose()


def expected_schema() -> dict[str, set[str]]:
    return {name: {c.name for c in table.columns} for name, table in Base.metadata.tables.items()}


def check_round_trip(url: str) -> None:
    head = head_revision(url)
    assert schema_of(url) == {}  # fresh

    upgrade(url)
    after_first = schema_of(url)
    assert after_first.pop("alembic_version") == {"version_num"}
    assert after_first == expected_schema()
    assert current_revision(url) == head
    assert drift(url) == []

    downgrade(url, "base")
    after_down = schema_of(url)
    assert set(after_down) <= {"alembic_version"}  # every application table is gone
    assert current_revision(url) is None

    upgrade(url)
    again = schema_of(url)
    again.pop("alembic_version")
    assert again == expected_schema()
    assert current_revision(url) == head
    assert drift(url) == []

    # The re-created schema is usable: a row goes in and comes back.
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO models (id, name, metadata, created_at, team_id, visibility) "
                              "VALUES ('md_x', 'migr-model', '{}', CURRENT_TIMESTAMP, 'local', 'private')"))
            assert conn.execute(text("SELECT name FROM models")).scalar_one() == "migr-model"
    finally:
        engine.dispose()


def test_models_define_the_core_tables() -> None:
    # Later revisions may add tables; these are the ones the HTTP contract relies on.
    assert {"benchmarks", "items", "models", "score_rows", "jobs", "job_inputs", "idempotency_keys"} <= set(
        Base.metadata.tables)
    assert "scores" in view_metadata.tables  # the per-cell view of score_rows (created by the migrations)


def test_migration_files_sort_in_chain_order() -> None:
    # issue 36: `ls` of the versions folder reads as the revision chain (base first, head last); a file
    # added on top of the head sorts after it as long as it takes the next number
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    chain = [Path(rev.path).name for rev in reversed(list(script.walk_revisions()))]
    assert chain == sorted(chain), chain
    assert all(name[:4].isdigit() for name in chain), chain


def test_round_trip_on_fresh_sqlite(sqlite_url: str) -> None:
    check_round_trip(sqlite_url)


@pytest.mark.slow
def test_round_trip_on_fresh_postgresql(postgres_url: str) -> None:
    check_round_trip(postgres_url)


def check_fits_move(url: str) -> None:
    """0006 moves a score-based coreset's diagnostics["fits"] into fitted_state (and back on downgrade)."""
    fits = {"bm_1": {"items": [3, 1], "n_items": 5, "X_ref": [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]],
                     "y_ref": [0.4, 0.6, 0.8], "weights": None, "lambda": 0.5, "irt": None}}
    upgrade(url, "0005")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for cid, diagnostics in [("cs_score", {"k": 2, "predictor": "ridge", "fits": fits}),
                                     ("cs_text", {"k": 2}), ("cs_none", None)]:
                conn.execute(text(
                    "INSERT INTO coresets (id, version, method, status, benchmark_ids, budget, params, seed, "
                    "diagnostics, created_at, updated_at) VALUES (:id, 1, 'pbsc', 'ready', '[\"bm_1\"]', '2', '{}', "
                    "0, :diag, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"),
                    {"id": cid, "diag": None if diagnostics is None else json.dumps(diagnostics)})
        upgrade(url)

        def read() -> dict[str, tuple[object, object]]:
            with engine.connect() as conn:
                rows = conn.execute(text("SELECT id, diagnostics, fitted_state FROM coresets")).all()
            decode = lambda v: json.loads(v) if isinstance(v, str) else v  # noqa: E731 (SQLite: text)
            return {r[0]: (decode(r[1]), decode(r[2])) for r in rows}

        after = read()
        assert after["cs_score"] == ({"k": 2, "predictor": "ridge", "fits_summary": {
            "bm_1": {"n_items": 5, "k": 2, "lambda": 0.5, "n_references": 3}}}, {"fits": fits})
        assert after["cs_text"] == ({"k": 2}, None) and after["cs_none"] == (None, None)

        downgrade(url, "0005")
        with engine.connect() as conn:
            rows = dict(conn.execute(text("SELECT id, diagnostics FROM coresets")).all())
        decoded = {k: json.loads(v) if isinstance(v, str) else v for k, v in rows.items()}
        assert decoded == {"cs_score": {"k": 2, "predictor": "ridge", "fits": fits}, "cs_text": {"k": 2},
                           "cs_none": None}
        assert "fitted_state" not in schema_of(url)["coresets"]
    finally:
        engine.dispose()


def test_fitted_state_data_migration_on_sqlite(sqlite_url: str) -> None:
    check_fits_move(sqlite_url)


def test_fitted_state_data_migration_on_postgresql(postgres_url: str) -> None:
    check_fits_move(postgres_url)


def check_rows_move_to_local(url: str) -> None:
    """teams_tokens_ownership: rows that existed before teams belong to the built-in team 'local',
    private; names become unique per team (two teams may both have 'mmlu')."""
    upgrade(url, "0006")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO benchmarks (id, name, embedding_fields, score_kind, default_metric, "
                              "data_version, created_at, updated_at) VALUES ('bm_old', 'mmlu', '[]', 'binary', "
                              "'score', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"))
            conn.execute(text("INSERT INTO models (id, name, metadata, created_at) "
                              "VALUES ('md_old', 'm', '{}', CURRENT_TIMESTAMP)"))
        upgrade(url)
        with engine.begin() as conn:
            assert conn.execute(text("SELECT team_id, visibility FROM benchmarks")).one() == ("local", "private")
            assert conn.execute(text("SELECT team_id, visibility FROM models")).one() == ("local", "private")
            assert conn.execute(text("SELECT id, name FROM teams")).all() == [("local", "local")]
            conn.execute(text("INSERT INTO teams (id, name, created_at) VALUES ('tm_b', 'b', CURRENT_TIMESTAMP)"))
            conn.execute(text("INSERT INTO benchmarks (id, name, embedding_fields, score_kind, default_metric, "
                              "data_version, created_at, updated_at, team_id, visibility) VALUES ('bm_new', 'mmlu', "
                              "'[]', 'binary', 'score', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'tm_b', 'private')"))
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(text("INSERT INTO benchmarks (id, name, embedding_fields, score_kind, default_metric, "
                              "data_version, created_at, updated_at, team_id, visibility) VALUES ('bm_dup', 'mmlu', "
                              "'[]', 'binary', 'score', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'tm_b', 'private')"))
    finally:
        engine.dispose()


def test_rows_move_to_local_on_sqlite(sqlite_url: str) -> None:
    check_rows_move_to_local(sqlite_url)


def test_rows_move_to_local_on_postgresql(postgres_url: str) -> None:
    check_rows_move_to_local(postgres_url)


def check_team_prefixed_names_are_renamed(url: str) -> None:
    """team_prefixed_names (issue 24): a name that reads as team/name is renamed; others are kept."""
    upgrade(url, "teams_tokens_ownership")
    engine = make_engine(url)
    bench = ("INSERT INTO benchmarks (id, name, embedding_fields, score_kind, default_metric, data_version, "
             "created_at, updated_at, team_id, visibility) VALUES (:id, :name, '[]', 'binary', 'score', 0, "
             "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, :team, 'public')")
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO teams (id, name, created_at) VALUES ('tm_a', 'alpha', CURRENT_TIMESTAMP)"))
            conn.execute(text("INSERT INTO teams (id, name, created_at) VALUES ('tm_b', 'beta', CURRENT_TIMESTAMP)"))
            for row_id, name, team in (("bm_1", "alpha/bench", "tm_b"), ("bm_2", "alpha--bench", "tm_b"),
                                       ("bm_3", "org/bench", "tm_b"), ("bm_4", "local/x", "tm_a")):
                conn.execute(text(bench), {"id": row_id, "name": name, "team": team})
            conn.execute(text("INSERT INTO models (id, name, metadata, created_at, team_id, visibility) "
                              "VALUES ('md_1', 'beta/m', '{}', CURRENT_TIMESTAMP, 'tm_a', 'public')"))
        upgrade(url)
        with engine.begin() as conn:
            names = dict(conn.execute(text("SELECT id, name FROM benchmarks")).all())
            assert names == {"bm_1": "alpha--bench-2", "bm_2": "alpha--bench", "bm_3": "org/bench", "bm_4": "local--x"}
            assert conn.execute(text("SELECT name FROM models")).scalar_one() == "beta--m"
        downgrade(url, "teams_tokens_ownership")
        upgrade(url)
    finally:
        engine.dispose()


def check_score_rows_move(url: str) -> None:
    """h27_score_rows: per-cell scores become one packed row per (benchmark, model, metric) at the items' dense
    positions (pk order per benchmark), the ``scores`` view shows the same cells; downgrade restores them exactly."""
    upgrade(url, "teams_tokens_ownership")
    engine = make_engine(url)
    cells = {("md_a", 11, "score"): 0.1 + 0.2, ("md_a", 13, "score"): 1.0, ("md_b", 12, "score"): -0.0,
             ("md_b", 13, "score"): 5e300, ("md_a", 11, "acc"): 0.5, ("md_a", 21, "score"): 1e-300,
             ("md_b", 22, "score"): 0.25}
    try:
        with engine.begin() as conn:
            for bm in ("bm_1", "bm_2"):
                conn.execute(text("INSERT INTO benchmarks (id, name, embedding_fields, score_kind, default_metric, "
                                  "data_version, created_at, updated_at, team_id, visibility) VALUES (:id, :id, '[]', "
                                  "'continuous', 'score', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'local', 'private')"),
                             {"id": bm})
            for md in ("md_a", "md_b"):
                conn.execute(text("INSERT INTO models (id, name, metadata, created_at, team_id, visibility) "
                                  "VALUES (:id, :id, '{}', CURRENT_TIMESTAMP, 'local', 'private')"), {"id": md})
            # items inserted out of pk order: positions follow pk order within each benchmark
            for pk, bm, item in [(13, "bm_1", "c"), (11, "bm_1", "a"), (12, "bm_1", "b"), (22, "bm_2", "y"),
                                 (21, "bm_2", "x"), (14, "bm_1", "d")]:
                conn.execute(text("INSERT INTO items (pk, benchmark_id, item_id, created_at) "
                                  "VALUES (:pk, :bm, :item, CURRENT_TIMESTAMP)"), {"pk": pk, "bm": bm, "item": item})
            for (md, pk, metric), value in cells.items():
                conn.execute(text("INSERT INTO scores (model_id, item_pk, metric, value) VALUES (:m, :p, :k, :v)"),
                             {"m": md, "p": pk, "k": metric, "v": value})
        upgrade(url)
        with engine.connect() as conn:
            positions = dict(conn.execute(text("SELECT pk, position FROM items")).all())
            assert positions == {11: 0, 12: 1, 13: 2, 14: 3, 21: 0, 22: 1}
            rows = {(r[0], r[1], r[2]): (r[3], r[4]) for r in conn.execute(text(
                "SELECT benchmark_id, model_id, metric, n_scores, version FROM score_rows"))}
            assert rows == {("bm_1", "md_a", "score"): (2, 1), ("bm_1", "md_b", "score"): (2, 1),
                            ("bm_1", "md_a", "acc"): (1, 1), ("bm_2", "md_a", "score"): (1, 1),
                            ("bm_2", "md_b", "score"): (1, 1)}
            view = {(r[0], r[1], r[2]): r[3] for r in conn.execute(text(
                "SELECT model_id, item_pk, metric, value FROM scores"))}
        assert view == cells
        if url.startswith("postgresql"):  # SQLite stores a REAL -0.0 as the integer 0
            assert all(math.copysign(1, view[k]) == math.copysign(1, v) for k, v in cells.items())
        downgrade(url, "teams_tokens_ownership")
        assert "position" not in schema_of(url)["items"] and "score_rows" not in schema_of(url)
        with engine.connect() as conn:
            back = {(r[0], r[1], r[2]): r[3] for r in conn.execute(text(
                "SELECT model_id, item_pk, metric, value FROM scores"))}
        assert back == cells
        if url.startswith("postgresql"):  # SQLite stores a REAL -0.0 as the integer 0 in any table
            assert all(math.copysign(1, back[k]) == math.copysign(1, v) for k, v in cells.items())
        upgrade(url)  # and up again over the restored cells
        with engine.connect() as conn:
            assert {(r[0], r[1], r[2]): r[3] for r in conn.execute(text(
                "SELECT model_id, item_pk, metric, value FROM scores"))} == cells
    finally:
        engine.dispose()


def test_team_prefixed_names_are_renamed_on_sqlite(sqlite_url: str) -> None:
    check_team_prefixed_names_are_renamed(sqlite_url)


def test_team_prefixed_names_are_renamed_on_postgresql(postgres_url: str) -> None:
    check_team_prefixed_names_are_renamed(postgres_url)


def test_score_rows_data_migration_on_sqlite(sqlite_url: str) -> None:
    check_score_rows_move(sqlite_url)


def test_score_rows_data_migration_on_postgresql(postgres_url: str) -> None:
    check_score_rows_move(postgres_url)
