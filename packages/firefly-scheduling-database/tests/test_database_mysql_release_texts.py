"""MySQL's group of releases as one text: how it is written, read and allowed (no server).

The text is `START TRANSACTION`, an owner-checked DELETE per lease in name order, and
`COMMIT` (`protocol.mysql.MySqlLeaseBatches.released`), with placeholders per lease
for the driver to fill: no value is ever written into it, and the values the driver
writes are hex digits (a name, decoded by `UNHEX`) and owner tokens, checked so before
they go. The lock's own MySQL connections allow texts of several statements; other
engines do not.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock
from firefly_scheduling_database import asyncio_driver as aio_driver
from firefly_scheduling_database.engine import async_lock_engine, lock_engine
from firefly_scheduling_database.mysql_text import hex_text
from firefly_scheduling_database.protocol import lease_batches_for, lease_sql_for
from firefly_scheduling_database.protocol.dialect import LeaseBatches
from firefly_scheduling_database.schema import LeaseTables

sys.path.insert(0, str(Path(__file__).resolve().parent))
from firefly_database_engine_arguments import connect_arguments

TABLES = LeaseTables.named("locks")
MULTI_STATEMENTS = 1 << 16
CLIENT_FOUND_ROWS = 2
#: Given out of name order, with values that must never appear in the text: each key
#: is a name's bytes as hex digits (`MySqlLeaseSql.key`).
HELD: list[tuple[str, str]] = [
    (hex_text("zeta'; DROP TABLE locks; --"), "owner-z"),
    (hex_text("alpha"), "owner-a"),
    (hex_text("mid"), "owner-m"),
]
IN_NAME_ORDER = sorted(HELD)
#: Port 1 is never contacted: engines connect lazily.
URL = "mysql://root@127.0.0.1:1/test"
#: The dialects of the lock's engines, as configured for their drivers (paramstyles).
PYMYSQL = lock_engine(URL).dialect
ASYNCMY = async_lock_engine(URL).dialect


def _batches(dialect: Any) -> LeaseBatches:
    batches = lease_batches_for(dialect, TABLES)
    assert batches is not None
    return batches


def test_the_pymysql_text_has_a_named_placeholder_pair_per_release() -> None:
    statement, parameters = _batches(PYMYSQL).released(HELD)
    deletes = [
        f"DELETE FROM locks WHERE name = UNHEX(%(name_{i})s) AND locked_by = %(owner_{i})s"
        for i in range(len(HELD))
    ]
    assert statement.driver_sql == "; ".join(["START TRANSACTION", *deletes, "COMMIT"])
    assert statement.statements == len(HELD) + 2
    expected: dict[str, object] = {}
    for index, (key, owner) in enumerate(IN_NAME_ORDER):
        expected |= {f"name_{index}": key, f"owner_{index}": owner}
    assert parameters == expected
    assert statement.driver_parameters(parameters) == expected
    for value in ("alpha", "mid", "zeta", "DROP TABLE", "owner-"):
        assert value not in statement.driver_sql, "values are the driver's to escape"


def test_the_asyncmy_text_has_positional_placeholders_in_name_order() -> None:
    statement, parameters = _batches(ASYNCMY).released(HELD)
    assert statement.driver_sql.count("name = UNHEX(%s) AND locked_by = %s") == len(HELD)
    assert statement.driver_sql.startswith("START TRANSACTION; DELETE FROM locks WHERE")
    assert statement.driver_sql.endswith("; COMMIT")
    assert statement.positions == ("name_0", "owner_0", "name_1", "owner_1", "name_2", "owner_2")
    flat = [value for pair in IN_NAME_ORDER for value in pair]
    assert statement.driver_parameters(parameters) == tuple(flat)
    assert "%(" not in statement.driver_sql


def test_a_text_is_rendered_once_per_group_size() -> None:
    batches = _batches(PYMYSQL)
    first, _ = batches.released(HELD)
    again, _ = batches.released(list(reversed(HELD)))
    assert again is first
    smaller, _ = batches.released(HELD[:2])
    assert smaller.statements == 4


def test_each_release_is_answered_by_its_own_delete_count() -> None:
    """Counts come in text order: START TRANSACTION, the DELETEs by name, COMMIT."""
    batches = _batches(PYMYSQL)
    # alpha: deleted; mid: no longer this owner's; zeta: deleted.
    deleted = batches.deleted_by_counts(HELD, [0, 1, 0, 1, 0])
    assert deleted == {HELD[1], HELD[0]}


@pytest.mark.parametrize(
    "value", ["a'b", "a\\b", 'say "hi"', "x; DROP TABLE t", "€", b"raw"], ids=repr
)
def test_a_value_that_could_end_a_literal_is_refused_in_a_text_of_several(value: object) -> None:
    """Only hex digits, tokens, numbers and instants go into a multi-statement text."""
    statement, parameters = _batches(PYMYSQL).released(HELD)
    with pytest.raises(ValueError, match="in a text of several statements"):
        statement.driver_parameters({**parameters, "owner_1": value})


def test_the_single_statements_take_the_name_as_hex_digits() -> None:
    sql = lease_sql_for(PYMYSQL, TABLES)
    for statement in (sql.acquire, sql.release, sql.renew, sql.fence, sql.holder):
        assert "UNHEX(%(name)s)" in statement.driver_sql
    assert sql.key("a\\b'€") == "a\\b'€".encode().hex().upper()


def test_a_count_missing_is_refused_naming_both_numbers() -> None:
    with pytest.raises(ValueError, match="3 releases has 5 statements, got 4 row counts"):
        _batches(PYMYSQL).deleted_by_counts(HELD, [0, 1, 1, 1])


def test_mysql_groups_releases_by_counts_and_bounds_a_group() -> None:
    batches = _batches(PYMYSQL)
    assert batches.answers_releases
    assert batches.releases_counted
    lock = DatabaseLeaseLock(URL)
    try:
        assert lock._releases.grouped is not None
        assert lock._releases.grouped._most == batches.most_releases == 64
    finally:
        lock.close()


def test_the_locks_own_mysql_connections_allow_several_statements() -> None:
    lock = DatabaseLeaseLock(URL)
    try:
        flags = connect_arguments(lock._bind)["client_flag"]
    finally:
        lock.close()
    assert flags & MULTI_STATEMENTS
    assert not flags & CLIENT_FOUND_ROWS, "an unchanged upsert must still count 0"


def test_the_asyncio_locks_own_mysql_connections_allow_several_statements() -> None:
    lock = AsyncDatabaseLeaseLock(URL)
    try:
        flags = connect_arguments(lock._bind.sync_engine)["client_flag"]
        assert lock._releases.grouped is not None
    finally:
        asyncio.run(lock.aclose())
    assert flags & MULTI_STATEMENTS
    assert not flags & CLIENT_FOUND_ROWS


def test_other_engines_keep_one_statement_per_text() -> None:
    flags = connect_arguments(lock_engine(URL))["client_flag"]
    assert not flags & MULTI_STATEMENTS


def test_every_result_of_a_text_is_read_and_the_cursor_closed() -> None:
    """`aio_driver.rowcounts` on an asyncmy-like connection: one count per result."""
    connection = _FakeAsyncmy([0, 1, 0, 1, 0])
    statement, parameters = _batches(ASYNCMY).released(HELD)
    counts = asyncio.run(aio_driver.rowcounts(connection, statement, parameters))
    assert counts == [0, 1, 0, 1, 0]
    assert connection.cursor_made.executed == (
        statement.driver_sql,
        statement.driver_parameters(parameters),
    )
    assert connection.cursor_made.closed


def test_a_failed_statement_raises_from_its_result_and_the_cursor_closes() -> None:
    connection = _FakeAsyncmy([0, 1], fails_at=2)
    statement, parameters = _batches(ASYNCMY).released(HELD)
    with pytest.raises(RuntimeError, match="statement 2 failed"):
        asyncio.run(aio_driver.rowcounts(connection, statement, parameters))
    assert connection.cursor_made.closed


class _FakeCursor:
    """asyncmy's cursor as `aio_driver` uses it: `execute`, `nextset`, `close` awaited."""

    def __init__(self, counts: list[int], fails_at: int | None) -> None:
        self._counts = counts
        self._fails_at = fails_at
        self._index = 0
        self.executed: tuple[str, object] | None = None
        self.closed = False

    @property
    def rowcount(self) -> int:
        return self._counts[self._index]

    async def execute(self, sql: str, arguments: object) -> None:
        self.executed = (sql, arguments)

    async def nextset(self) -> bool | None:
        if self._index + 1 == self._fails_at:
            raise RuntimeError(f"statement {self._fails_at} failed")
        if self._index + 1 >= len(self._counts):
            return None
        self._index += 1
        return True

    async def close(self) -> None:
        self.closed = True


class _FakeAsyncmy:
    def __init__(self, counts: list[int], *, fails_at: int | None = None) -> None:
        self.cursor_made = _FakeCursor(counts, fails_at)

    def cursor(self) -> _FakeCursor:
        return self.cursor_made
