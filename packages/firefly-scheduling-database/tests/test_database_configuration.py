"""Construction of `DatabaseLeaseLock`: URL kinds, drivers, redaction, tables, the provider.

Nothing here needs a server: engines connect lazily, so a URL pointing at a closed
port is enough to check what the lock was configured with.
"""

from __future__ import annotations

import pytest
from sqlalchemy.dialects import registry

from firefly_scheduling import ConfigurationError, Settings, resolve_lock
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock
from firefly_scheduling_database.anchor_store import DatabaseAnchorStore
from firefly_scheduling_database.engine import lock_engine
from firefly_scheduling_database.protocol import lease_sql_for
from firefly_scheduling_database.schema import LeaseTables
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_database.url import describe_url

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    ("url", "dialect", "driver"),
    [
        (f"postgresql://app:{SECRET}@127.0.0.1:1/app", "postgresql", "psycopg"),
        (f"postgres://app:{SECRET}@127.0.0.1:1/app", "postgresql", "psycopg"),
        (f"postgresql+psycopg://app:{SECRET}@127.0.0.1:1/app", "postgresql", "psycopg"),
        (f"mysql://root:{SECRET}@127.0.0.1:1/test", "mysql", "pymysql"),
        (f"mysql+pymysql://root:{SECRET}@127.0.0.1:1/test", "mysql", "pymysql"),
        (f"mariadb://root:{SECRET}@127.0.0.1:1/test", "mariadb", "pymysql"),
        ("sqlite:///relative/locks.db", "sqlite", "pysqlite"),
    ],
)
def test_url_kinds_map_to_the_tested_drivers(url: str, dialect: str, driver: str) -> None:
    engine = lock_engine(url)
    assert (engine.dialect.name, engine.dialect.driver) == (dialect, driver)
    engine.dispose()


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        (f"redis://:{SECRET}@127.0.0.1:6379/0", "redis"),
        (f"postgresql+psycopg2://app:{SECRET}@db/app", "postgresql+psycopg2"),
        (f"mysql+mysqldb://root:{SECRET}@db/test", "mysql+mysqldb"),
        (f"mssql+pyodbc://sa:{SECRET}@db/app", "mssql+pyodbc"),
        (f"memcached://u:{SECRET}@127.0.0.1:11211", "memcached"),
    ],
)
def test_other_url_kinds_are_refused_naming_provider_and_scheme(url: str, scheme: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        DatabaseLeaseLock(url)
    message = str(caught.value)
    assert "database lock provider" in message
    assert scheme in message
    assert SECRET not in message


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:locks?mode=memory&uri=true"]
)
def test_in_memory_sqlite_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="in-memory SQLite"):
        DatabaseLeaseLock(url)


@pytest.mark.parametrize("url", ["", "   ", "locks.db"])
def test_missing_or_scheme_less_url_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="database"):
        DatabaseLeaseLock(url)


def test_something_that_is_not_a_database_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="URL, an Engine or a Connection"):
        DatabaseLeaseLock(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("dialect_name", ["mssql", "oracle"])
def test_an_unsupported_dialect_is_refused_by_name(dialect_name: str) -> None:
    dialect = registry.load(dialect_name)()
    with pytest.raises(ConfigurationError, match="does not support") as caught:
        lease_sql_for(dialect, LeaseTables.named("locks"))
    assert "postgresql, mysql, mariadb, sqlite" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"postgresql://app:{SECRET}@db.internal:5432/app",
            "DatabaseLeaseLock('postgresql+psycopg://app:***@db.internal:5432/app')",
        ),
        (
            f"mysql://root:{SECRET}@db.internal/test?charset=utf8mb4",
            "DatabaseLeaseLock('mysql+pymysql://root:***@db.internal/test?charset=utf8mb4')",
        ),
        (
            "sqlite:////var/lib/app/locks.db",
            "DatabaseLeaseLock('sqlite+pysqlite:////var/lib/app/locks.db')",
        ),
    ],
)
def test_repr_shows_the_redacted_url(url: str, shown: str) -> None:
    lock = DatabaseLeaseLock(url)
    assert repr(lock) == shown
    assert SECRET not in repr(lock)


@pytest.mark.parametrize("table", ["locks", "Locks_2", "_x", "t" * 56])
def test_plain_table_names_are_accepted(table: str) -> None:
    tables = DatabaseLeaseLock("sqlite:///locks.db", table=table).tables
    assert (tables.locks.name, tables.fences.name) == (table, table + "_fences")


@pytest.mark.parametrize("table", ["", "t" * 57, "my-locks", "locks; drop table x", "1locks"])
def test_odd_table_names_are_refused(table: str) -> None:
    with pytest.raises(ConfigurationError, match="plain table name"):
        DatabaseLeaseLock("sqlite:///locks.db", table=table)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DATABASE_URL": "sqlite:///fallback.db"}, "fallback.db"),
        (
            {
                "DATABASE_URL": "sqlite:///fallback.db",
                "FIREFLY_SCHEDULING_LOCK_DATABASE_URL": "sqlite:///specific.db",
            },
            "specific.db",
        ),
    ],
)
def test_provider_is_found_through_its_entry_point(env: dict[str, str], expected: str) -> None:
    lock = resolve_lock(Settings.from_env({"FIREFLY_SCHEDULING_LOCK_PROVIDER": "database", **env}))
    assert isinstance(lock, DatabaseLeaseLock)
    assert repr(lock).endswith(f"/{expected}')")


def test_a_percent_encoded_password_is_scrubbed_in_both_forms() -> None:
    shown, secrets = describe_url("postgresql://app:p%40ss%2Fw@db.internal/app")
    assert shown == "postgresql://app:***@db.internal/app"
    assert {"p%40ss%2Fw", "p@ss/w"} <= set(secrets)


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("mysql://app:s3cr3t@127.0.0.1:1/app?charset=swe7", "charset=swe7 cannot carry"),
        ("mysql://app:s3cr3t@127.0.0.1:1/app?charset=nope", "unknown charset 'nope'"),
        ("postgresql://app:s3cr3t@127.0.0.1:1/app?client_encoding=SJIS", "client_encoding=SJIS"),
        (
            "postgresql://app:s3cr3t@127.0.0.1:1/app?options=-c%20client_encoding%3DLATIN1",
            "client_encoding=LATIN1",
        ),
    ],
    ids=["mysql-no-codec", "mysql-unknown", "postgres-parameter", "postgres-options"],
)
@pytest.mark.parametrize(
    "build",
    [DatabaseLeaseLock, AsyncDatabaseLeaseLock, SqlRunHistory, DatabaseAnchorStore],
    ids=lambda build: build.__name__,
)
def test_a_session_encoding_that_cannot_carry_every_name_is_refused_when_built(
    url: str, named: str, build: type[object]
) -> None:
    with pytest.raises(ConfigurationError, match=named) as caught:
        build(url)
    assert "s3cr3t" not in str(caught.value)


@pytest.mark.parametrize("charset", ["gbk", "big5", "sjis"])
def test_a_multibyte_mysql_charset_is_accepted(charset: str) -> None:
    lock = DatabaseLeaseLock(f"mysql://app@127.0.0.1:1/app?charset={charset}")
    lock.close()
