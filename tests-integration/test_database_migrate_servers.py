"""`firefly-scheduling migrate` on real PostgreSQL and MySQL/MariaDB servers.

Each test gets a private, empty schema (PostgreSQL, through `search_path`) or
database (MySQL), so "migrate created the tables" is not confused with tables other
tests left in the shared `test` database. Every table the database package uses
must exist after one run, a second run must change nothing, and the lock, the
anchor store and the run history must then work on them.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from click.testing import CliRunner
from sqlalchemy import inspect

from firefly_scheduling.history.port import RunState
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.anchor_store import DatabaseAnchorStore
from firefly_scheduling_database.cli import migrate
from firefly_scheduling_database.control_store import DatabaseControlStore
from firefly_scheduling_database.engine import lock_engine
from firefly_scheduling_database.sql_history.store import SqlRunHistory

EVERY_TABLE = {
    "firefly_scheduling_locks",
    "firefly_scheduling_locks_fences",
    "firefly_scheduling_locks_queue",
    "firefly_scheduling_anchors",
    "firefly_scheduling_control",
    "firefly_scheduling_runs",
}


def _tables(url: str) -> set[str]:
    engine = lock_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _migrate_twice_then_use(url: str) -> None:
    runner = CliRunner()
    assert _tables(url) == set()
    for _ in range(2):
        result = runner.invoke(migrate, ["--url", url])
        assert result.exit_code == 0, result.output
        assert (
            "firefly_scheduling_anchors, firefly_scheduling_control and firefly_scheduling_runs "
            "are ready" in result.output
        )
        assert _tables(url) == EVERY_TABLE

    lock = DatabaseLeaseLock(url)
    try:
        assert lock.try_acquire_fenced("migrated", 30) == 1
        lock.release("migrated")
    finally:
        lock.close()
    anchors = DatabaseAnchorStore(url)
    try:
        assert anchors.add("firefly:scheduling:initial-delay:pkg:task", "1.0")
        assert anchors.get("firefly:scheduling:initial-delay:pkg:task") == "1.0"
    finally:
        anchors.close()
    history = SqlRunHistory(url)
    instant = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)
    try:
        assert (
            history.start("pkg:task", instant, lock="pkg:task", node="n1", token=1, at=instant) == 1
        )
        assert history.finish(
            "pkg:task",
            instant,
            lock="pkg:task",
            token=1,
            state=RunState.SUCCEEDED,
            error=None,
            at=instant,
        )
        assert [record.state for record in history.runs("pkg:task")] == [RunState.SUCCEEDED]
    finally:
        history.close()
    control = DatabaseControlStore(url)
    try:
        control.pause("pkg:task", by="migrate-test")
        assert control.pause_of("pkg:task") is not None
    finally:
        control.close()
    assert _tables(url) == EVERY_TABLE  # nothing else was created on first use


def test_migrate_creates_every_table_on_postgres(postgres_schema_url: str) -> None:
    _migrate_twice_then_use(postgres_schema_url)


def test_migrate_creates_every_table_on_mysql(mysql_database_url: str) -> None:
    _migrate_twice_then_use(mysql_database_url)


STORE_TABLES = {
    "firefly_scheduling_anchors",
    "firefly_scheduling_control",
    "firefly_scheduling_runs",
}


@pytest.mark.parametrize(
    ("provider", "url_fixture"),
    [("postgres", "postgres_schema_url"), ("mysql", "mysql_database_url")],
)
def test_migrate_under_a_session_lock_provider_creates_its_stores_tables(
    provider: str, url_fixture: str, request: pytest.FixtureRequest
) -> None:
    # The postgres and mysql providers keep their anchors, control store and run history
    # in their own database, through this package's stores; they have no lease table.
    url = str(request.getfixturevalue(url_fixture))
    result = CliRunner().invoke(
        migrate,
        [],
        env={
            "FIREFLY_SCHEDULING_LOCK_PROVIDER": provider,
            f"FIREFLY_SCHEDULING_LOCK_{provider.upper()}_URL": url,
            "FIREFLY_SCHEDULING_LOCK_DATABASE_URL": None,
            "DATABASE_URL": None,
        },
    )
    assert result.exit_code == 0, result.output
    assert f"'{provider}' lock provider" in result.output
    assert _tables(url) == STORE_TABLES
