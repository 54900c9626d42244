"""Fresh tables for the SQL stores' tests, so reruns on the shared servers never collide.

Each test (or contract class) that writes leases or run records works in a table of
its own, created as `firefly-scheduling migrate` would and dropped afterwards with
everything the store created beside it (a lease table's fence table). The fencing
tests write to an application's table of their own (`fenced_table`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pymysql
from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table, create_engine
from sqlalchemy.engine import make_url

from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.engine import lock_engine
from firefly_scheduling_database.sql_history.schema import DEFAULT_TABLE
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_mysql.url import connection_arguments


@contextmanager
def installed_lease_table(url: str, prefix: str) -> Iterator[str]:
    """The name of a new lease table on `url`'s database, dropped on exit."""
    table = f"{prefix}_{uuid.uuid4().hex[:12]}"
    installer = DatabaseLeaseLock(url, table=table)
    installer.install()
    try:
        yield table
    finally:
        engine = lock_engine(url)
        for created in installer.tables.all:
            created.drop(engine, checkfirst=True)
        engine.dispose()
        installer.close()


@contextmanager
def installed_history(url: str, *, read_timeout: int | None = None) -> Iterator[SqlRunHistory]:
    """A run history on a new table of `url`'s database, dropped on exit.

    `read_timeout`: a MySQL history's reply deadline in seconds, instead of its
    default (a test that makes a statement wait sees it time out sooner).
    """
    if read_timeout is not None:
        url = (
            make_url(url)
            .update_query_dict({"read_timeout": str(read_timeout)})
            .render_as_string(hide_password=False)
        )
    history = SqlRunHistory(url, table=f"runs_{uuid.uuid4().hex[:12]}")
    history.install()
    try:
        yield history
    finally:
        history.table.drop(history.engine, checkfirst=True)
        history.close()


def mysql_server_client(mysql_url: str) -> Any:
    """A client of `mysql_url`'s server, on no database, in autocommit (an admin's)."""
    parts = urlsplit(mysql_url)
    return pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        autocommit=True,
    )


def mysql_client(mysql_url: str) -> Any:
    """A client of `mysql_url`'s server other than the node's, in autocommit."""
    return pymysql.connect(**connection_arguments(mysql_url), autocommit=True)


@contextmanager
def private_mysql_database(mysql_url: str) -> Iterator[str]:
    """A URL on a fresh, empty MySQL/MariaDB database, dropped on exit: nothing another
    test creates or drops meanwhile shows in it."""
    database = f"firefly_private_{uuid.uuid4().hex[:12]}"
    parts = urlsplit(mysql_url)
    admin = mysql_server_client(mysql_url)
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {database}")
        yield urlunsplit(parts._replace(path=f"/{database}"))
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {database}")
        admin.close()


@contextmanager
def default_history(url: str) -> Iterator[SqlRunHistory]:
    """The run history on its default table, where real nodes write: a second client."""
    history = SqlRunHistory(url, table=DEFAULT_TABLE)
    history.install()
    try:
        yield history
    finally:
        history.close()


@contextmanager
def fenced_table(url: str, prefix: str, column: str, rows: Mapping[int, str]) -> Iterator[Table]:
    """A new application table on the database of `url` (a SQLAlchemy URL), dropped on
    exit: an integer `id`, one text `column` and a nullable BIGINT `fence_token`, as
    `fenced_update` wants. It holds `rows` (id to text), none of them fenced yet."""
    table = Table(
        f"{prefix}_{uuid.uuid4().hex[:12]}",
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column(column, String(64)),
        Column("fence_token", BigInteger, nullable=True),
    )
    engine = create_engine(url)
    table.create(engine)
    try:
        with engine.begin() as connection:
            for row_id, text in rows.items():
                connection.execute(
                    table.insert().values(id=row_id, fence_token=None, **{column: text})
                )
        yield table
    finally:
        table.drop(engine)
        engine.dispose()
