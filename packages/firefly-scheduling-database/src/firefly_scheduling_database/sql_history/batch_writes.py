"""The run history's writes of many records at once, each record with its own answer.

A resident node ends the fires of an instant together, starts the runs of the
fires it won together, and a node back from an outage records up to a thousand
passed-over fires at once. One statement and one commit per record kept the fires
behind them waiting, so each of these goes as few statements as its dialect allows,
on the same conditions as the single write, row by row:

* starts of new runs (`start_new_many`): one `INSERT … SELECT … FROM unnest(…)` on
  PostgreSQL (`array_statements`); elsewhere the records standing in the way are
  read, then the rest inserted as one multi-row insert, in one transaction;
* skips of many instants of one task (`insert_absent_rows`): multi-row inserts of
  the absent keys;
* finishes (`finished_together`, `finished_in_one_transaction`): one `UPDATE … FROM
  unnest(…)` on PostgreSQL, one text of each finish's `UPDATE` and a `COMMIT` on
  MySQL, one transaction on SQLite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from firefly_scheduling_database.sql_history.array_statements import FINISH_ARRAYS
from firefly_scheduling_database.sql_history.driver import DriverPath, DriverStatement
from firefly_scheduling_database.sql_history.rows import fresh, prefixed, row_key, unprefixed
from firefly_scheduling_database.sql_history.statements import (
    DriverStatements,
    HotStatements,
    numbered,
)

#: The columns `array_statements.skip_many_from_an_array` takes once for a whole catch-up.
SKIP_MANY_SHARED = ("lock_name", "task", "node", "ended_at", "error")

RowKey = tuple[str, str, datetime]


def started_on_driver(
    path: DriverPath, statement: DriverStatement, rows: list[dict[str, Any]]
) -> set[RowKey]:
    """PostgreSQL: the batch of new runs in one statement; the keys of those started."""
    parameters = {
        "p_lock_names": [row["lock_name"] for row in rows],
        "p_tasks": [row["task"] for row in rows],
        "p_instants": [row["instant"] for row in rows],
        "p_tokens": [row["token"] for row in rows],
        "p_node": rows[0]["node"],
        "p_started_at": rows[0]["started_at"],
    }
    return {row_key(row) for row in path.rows(statement, parameters)}


def started_in_two(
    engine: Engine,
    statements: HotStatements,
    driver: DriverStatements | None,
    rows: list[dict[str, Any]],
) -> set[RowKey]:
    """Elsewhere: the records in the way read, the rest inserted, in one transaction.

    A record written between the two (a skip by a node that was too late) fails the
    whole insert on its key, and nothing is started: every fire of the batch then
    starts the usual way.
    """
    lock_names = sorted({row["lock_name"] for row in rows})
    instants = sorted({row["instant"] for row in rows})
    parameters = {"p_lock_names": lock_names, "p_instants": instants}
    if driver is not None and driver.in_the_way is not None and driver.insert is not None:
        started = driver.path.read_then_insert(
            driver.in_the_way(len(lock_names), len(instants)),
            numbered("p_lock_name", lock_names) | numbered("p_instant", instants),
            driver.insert,
            lambda found: [prefixed(row) for row in fresh(rows, found)],
        )
        return set() if started is None else {row_key(unprefixed(r)) for r in started}
    try:
        with engine.begin() as connection:
            found = connection.execute(statements.in_the_way, parameters).mappings()
            rest = fresh(rows, found)
            if rest:
                connection.execute(statements.runs.insert(), rest)
    except IntegrityError:
        return set()
    return {row_key(row) for row in rest}


def insert_if_absent(
    connection: Connection, statements: HotStatements, row: dict[str, Any]
) -> bool:
    """Insert `row` unless its key exists; whether it was inserted.

    PostgreSQL and SQLite say so with `ON CONFLICT DO NOTHING RETURNING` (no error
    in the server log for every duplicate). MySQL's `INSERT IGNORE` would also
    swallow truncation errors, so there a duplicate is a caught IntegrityError.
    """
    statement = statements.insert_if_absent
    if statement is not None:
        return connection.execute(statement, row).first() is not None
    try:
        with connection.begin_nested():
            connection.execute(statements.runs.insert(), row)
    except IntegrityError:
        return False
    return True


def insert_absent_rows(
    connection: Connection, statements: HotStatements, rows: list[dict[str, Any]]
) -> int:
    """Insert those of `rows` (one lock and task) whose key is absent; how many.

    The statement is compiled once per store and executed for the whole list:
    SQLAlchemy and the driver send it as multi-row inserts (a statement with
    every value inline cost more CPU to build than its round trip). PostgreSQL
    and SQLite: `INSERT … ON CONFLICT DO NOTHING RETURNING`, whose rows are the
    inserted ones. MySQL has no such clause without `IGNORE` (which also swallows
    truncation): a plain insert, and only when a key exists already (another
    node wrote the same catch-up), the existing keys are read and the rest
    inserted.
    """
    runs = statements.runs
    many = statements.skip_many
    if many is not None:
        first = rows[0]
        parameters = {f"p_{name}": first[name] for name in SKIP_MANY_SHARED}
        parameters["p_instants"] = [row["instant"] for row in rows]
        return len(connection.execute(many, parameters).all())
    statement = statements.insert_if_absent
    if statement is not None:
        return len(connection.execute(statement, rows).all())
    try:
        with connection.begin_nested():
            connection.execute(runs.insert(), rows)
    except IntegrityError:
        existing = set(
            connection.execute(
                sa.select(runs.c.instant).where(
                    runs.c.lock_name == rows[0]["lock_name"],
                    runs.c.task == rows[0]["task"],
                    runs.c.instant.in_([row["instant"] for row in rows]),
                )
            ).scalars()
        )
        absent = [row for row in rows if row["instant"] not in existing]
        if not absent:
            return 0
        if len(absent) == len(rows):
            raise  # not a duplicate key: the error is the statement's own
        return insert_absent_rows(connection, statements, absent)
    return len(rows)


def finished_together(
    driver: DriverStatements, finishes: Sequence[Mapping[str, Any]]
) -> list[bool]:
    """A group of finishes (`GroupedCalls`) in one round trip, each with its own answer.

    The fires of an instant end together, in as many worker threads, and one at a
    time each finish was one round trip on PostgreSQL and two on MySQL (an `UPDATE`
    and a `COMMIT`), with the thread hand-offs around them: on MySQL most of a won
    fire's CPU. PostgreSQL: one `UPDATE … FROM unnest(…) RETURNING`, the same
    conditions row by row. MySQL: one text of each finish's own `UPDATE` and a
    `COMMIT`, each answered by its row count. A lone finish on PostgreSQL is sent
    alone.
    """
    path = driver.path
    if len(finishes) == 1 and driver.finish_many is not None:
        [parameters] = finishes
        return [path.rowcount(driver.finish[parameters["p_token"] is None], parameters) == 1]
    if driver.finish_many is not None:
        arrays = {name: [finish[key] for finish in finishes] for name, key in FINISH_ARRAYS}
        arrays["p_places"] = list(range(len(finishes)))
        done = {row["place"] for row in path.rows(driver.finish_many, arrays)}
        return [place in done for place in range(len(finishes))]
    sent = [(driver.finish[finish["p_token"] is None], finish) for finish in finishes]
    return [count == 1 for count in path.rowcounts_together(sent)]


def finished_in_one_transaction(
    single: Engine, statements: HotStatements, finishes: Sequence[Mapping[str, Any]]
) -> list[bool]:
    """A group of finishes (`GroupedCalls`) on SQLite: one transaction, an answer each.

    Each finish is its own statement, on its own conditions, answered by its own
    row count; the group commits once. On SQLite a commit takes the file's write
    lock (and syncs the log), and one per finish put the fires of an instant behind
    one another and behind the other nodes' writes. A group is written whole or not
    at all.
    """
    finish = statements.finish
    with single.begin() as connection:
        return [
            connection.execute(finish[parameters["p_token"] is None], parameters).rowcount == 1
            for parameters in finishes
        ]
