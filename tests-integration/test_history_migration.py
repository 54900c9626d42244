"""an older run-history table is refused at boot and upgraded by `migrate --history`.

0.1.0 keyed the history by `(task, instant)`; two deployments sharing the database
adopted each other's fires. A table created before the trigger columns has the key
but not `trigger_kind` and `requested_by` (what made each fire, who asked). Each test
builds an older table with rows in a private database (a SQLite file, a fresh
PostgreSQL schema, a fresh MariaDB database), so the shared `test` databases are
never touched.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from firefly_scheduling.cli import main
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history import HistoryError, RunState, resolve_history
from firefly_scheduling.settings import Settings
from firefly_scheduling_database.cli import migrate
from firefly_scheduling_database.engine import lock_engine
from firefly_scheduling_database.sql_history.schema import (
    DEFAULT_TABLE,
    KEY,
    OLD_KEY,
    TRIGGER_COLUMN,
    TRIGGER_COLUMNS,
    OldHistoryTable,
    runs_table,
    table_key,
)
from firefly_scheduling_database.sql_history.store import SqlRunHistory, create_history_store

TASK = "pkg.jobs:report"
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def _old_table(name: str) -> sa.Table:
    """The 0.1.0 table: today's columns without `lock_name` and `trigger_kind`, keyed by
    (task, instant)."""
    current = runs_table(name)
    return sa.Table(
        name,
        sa.MetaData(),
        *(
            sa.Column(c.name, c.type, primary_key=c.name in OLD_KEY, nullable=c.nullable)
            for c in current.columns
            if c.name not in ("lock_name", *TRIGGER_COLUMNS)
        ),
        sa.Index(f"{name}_by_instant", "instant"),
        sa.Index(f"{name}_by_state_ended", "state", "ended_at"),
    )


def _row(instant: datetime, state: RunState, node: str) -> dict[str, object]:
    finished = state is not RunState.RUNNING
    return {
        "task": TASK,
        "instant": instant,
        "node": node,
        "attempt": 1,
        "state": state.value,
        "started_at": instant,
        "ended_at": instant if finished else None,
        "error": None,
        "token": 3,
    }


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def old_history_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A private database holding a 0.1.0 history table with a succeeded and a running fire."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'old-history.db'}"
    elif request.param == "postgres":
        url = request.getfixturevalue("postgres_schema_url")
    else:
        url = request.getfixturevalue("mysql_database_url")
    engine = lock_engine(url)
    try:
        table = _old_table(DEFAULT_TABLE)
        table.create(engine)
        with engine.begin() as connection:
            connection.execute(table.insert(), [_row(T0, RunState.SUCCEEDED, "old-1")])
            connection.execute(
                table.insert(), [_row(T0 + timedelta(minutes=1), RunState.RUNNING, "old-2")]
            )
    finally:
        engine.dispose()
    return url


def _table_without_triggers(name: str) -> sa.Table:
    """A table of today's key, created before `trigger_kind` and `requested_by` were."""
    current = runs_table(name)
    return sa.Table(
        name,
        sa.MetaData(),
        *(
            sa.Column(
                c.name,
                c.type,
                primary_key=c.primary_key,
                nullable=c.nullable,
                server_default=c.server_default,
            )
            for c in current.columns
            if c.name not in TRIGGER_COLUMNS
        ),
    )


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def untriggered_history_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A private database holding a history table without the trigger columns, one row."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'untriggered.db'}"
    elif request.param == "postgres":
        url = request.getfixturevalue("postgres_schema_url")
    else:
        url = request.getfixturevalue("mysql_database_url")
    engine = lock_engine(url)
    try:
        table = _table_without_triggers(DEFAULT_TABLE)
        table.create(engine)
        with engine.begin() as connection:
            connection.execute(
                table.insert(), [{**_row(T0, RunState.SUCCEEDED, "old-1"), "lock_name": TASK}]
            )
    finally:
        engine.dispose()
    return url


def _has_trigger_column(url: str) -> bool:
    engine = lock_engine(url)
    try:
        with engine.connect() as connection:
            columns = sa.inspect(connection).get_columns(DEFAULT_TABLE)
        names = {column["name"] for column in columns}
        return set(TRIGGER_COLUMNS) <= names
    finally:
        engine.dispose()


def test_a_table_without_the_trigger_column_is_refused_at_boot(
    untriggered_history_url: str,
) -> None:
    with pytest.raises(OldHistoryTable) as caught:
        resolve_history(Settings(history_url=untriggered_history_url))
    message = str(caught.value)
    assert repr(TRIGGER_COLUMN) in message
    assert "firefly-scheduling migrate --history" in message
    assert not _has_trigger_column(untriggered_history_url)


def test_migrate_history_adds_the_trigger_column_and_old_rows_read_scheduled(
    untriggered_history_url: str,
) -> None:
    runner = CliRunner()
    result = runner.invoke(migrate, ["--history", "--url", untriggered_history_url])
    assert result.exit_code == 0, result.output
    assert f"run-history table {DEFAULT_TABLE} upgraded" in result.output
    assert _has_trigger_column(untriggered_history_url)
    history = create_history_store(untriggered_history_url)
    try:
        [old] = history.runs(TASK)
        assert (old.node, old.trigger) == ("old-1", "scheduled")
        later = T0 + timedelta(minutes=1)
        assert history.start(TASK, later, lock=TASK, node="n", token=4, at=T0, trigger="manual")
        assert history.runs(TASK, limit=1)[0].trigger == "manual"
    finally:
        history.close()
    again = runner.invoke(migrate, ["--history", "--url", untriggered_history_url])
    assert f"run-history table {DEFAULT_TABLE} current" in again.output


def _key_and_rows(url: str) -> tuple[tuple[str, ...] | None, int]:
    engine = lock_engine(url)
    try:
        with engine.connect() as connection:
            key = table_key(connection, DEFAULT_TABLE)
            count = connection.execute(
                sa.select(sa.func.count()).select_from(sa.table(DEFAULT_TABLE))
            ).scalar_one()
        return key, int(count)
    finally:
        engine.dispose()


def test_an_old_table_is_refused_at_boot_naming_the_table_and_the_command(
    old_history_url: str,
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        resolve_history(Settings(history_url=old_history_url))
    message = str(caught.value)
    assert isinstance(caught.value, OldHistoryTable)
    assert repr(DEFAULT_TABLE) in message
    assert "firefly-scheduling migrate --history" in message
    assert "0.1.0" in message
    with pytest.raises(OldHistoryTable):
        create_history_store(old_history_url)
    # The table is left exactly as it was: refused, never half-used.
    assert _key_and_rows(old_history_url) == (OLD_KEY, 2)


def test_an_old_table_found_after_boot_fails_every_call_softly(old_history_url: str) -> None:
    """Reached only on first use (the database was down at boot): a HistoryError, no write."""
    store = SqlRunHistory(old_history_url)
    try:
        with pytest.raises(HistoryError, match="migrate --history"):
            store.start(TASK, T0 + timedelta(minutes=2), lock=TASK, node="n", token=4, at=T0)
        with pytest.raises(HistoryError, match="migrate --history"):
            store.unfinished(TASK, lock=TASK)
    finally:
        store.close()
    assert _key_and_rows(old_history_url) == (OLD_KEY, 2)


def test_migrate_history_upgrades_the_table_and_keeps_its_records(old_history_url: str) -> None:
    runner = CliRunner()
    result = runner.invoke(migrate, ["--history", "--url", old_history_url])
    assert result.exit_code == 0, result.output
    assert f"run-history table {DEFAULT_TABLE} upgraded" in result.output
    assert _key_and_rows(old_history_url) == (KEY, 2)
    assert _has_trigger_column(old_history_url)

    history = create_history_store(old_history_url)  # the boot check passes now
    try:
        # Old rows are a `lock=True` task's: their lock name is the target.
        [running] = history.unfinished(TASK, lock=TASK)
        assert (running.node, running.lock, running.token) == ("old-2", TASK, 3)
        success = history.last_success(TASK, lock=TASK)
        assert success is not None
        assert (success.instant, success.node) == (T0, "old-1")
        # Another deployment's run of the same fire is its own record now.
        assert history.start(TASK, T0, lock=f"staging:{TASK}", node="s", token=1, at=T0) == 1
        assert history.unfinished(TASK, lock=f"staging:{TASK}")[0].node == "s"
        assert [r.node for r in history.unfinished(TASK, lock=TASK)] == ["old-2"]
    finally:
        history.close()

    again = runner.invoke(migrate, ["--history", "--url", old_history_url])
    assert again.exit_code == 0, again.output
    assert f"run-history table {DEFAULT_TABLE} current" in again.output
    assert _key_and_rows(old_history_url) == (KEY, 3)


def test_plain_migrate_upgrades_it_too(old_history_url: str) -> None:
    result = CliRunner().invoke(migrate, ["--url", old_history_url])
    assert result.exit_code == 0, result.output
    assert "upgraded to the (lock_name, task, instant) key" in result.output
    assert _key_and_rows(old_history_url) == (KEY, 2)


def test_migrate_history_creates_an_absent_table(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = CliRunner().invoke(migrate, ["--history", "--url", url])
    assert result.exit_code == 0, result.output
    assert f"run-history table {DEFAULT_TABLE} created" in result.output
    assert _key_and_rows(url) == (KEY, 0)


def test_migrate_history_without_a_sql_history_says_what_to_set() -> None:
    result = CliRunner().invoke(
        migrate, ["--history"], env={"FIREFLY_SCHEDULING_LOCK_PROVIDER": "redis"}
    )
    assert result.exit_code != 0
    assert "FIREFLY_SCHEDULING_HISTORY_URL" in result.output


@pytest.mark.parametrize("command", [["tick", "--app", "firefly_scheduling.demo_app"], ["runs"]])
def test_a_host_or_a_command_on_an_old_table_exits_2_before_any_fire(
    tmp_path: Path, command: list[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = lock_engine(url)
    try:
        _old_table(DEFAULT_TABLE).create(engine)
    finally:
        engine.dispose()
    result = CliRunner().invoke(
        main,
        command,
        env={
            "FIREFLY_SCHEDULING_LOCK_PROVIDER": "memory",
            "FIREFLY_SCHEDULING_HISTORY_URL": url,
            "FIREFLY_SCHEDULING_INITIAL_DELAY_STORE": "memory://",
        },
    )
    assert result.exit_code == 2, result.output
    assert "firefly-scheduling migrate --history" in result.output
    assert "firefly_scheduling_runs" in result.output
    assert _key_and_rows(url) == (OLD_KEY, 0)
