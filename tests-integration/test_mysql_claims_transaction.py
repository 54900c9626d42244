"""MySQL: a batch of fire claims is one transaction, all of it stands or none of it.

`MySqlNamedLock.try_claim_many` sends an instant's claims as one text in one
transaction (`statements.claim_many`): one log flush instead of one per claim. These
tests read the server with a second client:

* a batch whose middle claim waits on a row that another client holds past the lock
  wait timeout answers every claim with an error, and none of its rows exists
  (the rows before the wait were rolled back with the transaction), and the lock's
  session is left with no transaction open: its next batch claims the same names;
* a batch into a missing claims table creates it and answers each claim;
* claims given in any order are answered in the order given.
"""

from __future__ import annotations

import time
from typing import Any

import pymysql

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql import protocol as sql
from firefly_scheduling_mysql.url import connection_arguments


def _names(tag: str, count: int) -> list[str]:
    stamp = time.time_ns()
    return [f"claims-{tag}-{stamp}-{index:02d}" for index in range(count)]


def _reader(mysql_url: str, *, autocommit: bool = True) -> Any:
    return pymysql.connect(**connection_arguments(mysql_url), autocommit=autocommit)


def _claimed(reader: Any, names: list[str]) -> list[str]:
    servers = {MySqlNamedLock.server_name(name): name for name in names}
    with reader.cursor() as cursor:
        cursor.execute(
            f"SELECT name FROM {sql.CLAIM_TABLE} WHERE name IN ({', '.join(['%s'] * len(names))})",
            list(servers),
        )
        found = {bytes(name).decode() for (name,) in cursor.fetchall()}
    return sorted(servers[server] for server in found)


def test_a_batch_that_fails_part_way_leaves_no_claim_and_no_open_transaction(
    mysql_url: str,
) -> None:
    lock = MySqlNamedLock(mysql_url)
    blocker = _reader(mysql_url, autocommit=False)
    reader = _reader(mysql_url)
    try:
        names = _names("stuck", 6)
        assert lock.try_claim_many([(names[0], 60)]) == [True]  # the session, and the table
        connection = lock._sessions[0].connection  # the first free session claims
        assert connection is not None
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
        # A second client inserts the middle name's row and keeps it locked.
        with blocker.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {sql.CLAIM_TABLE} (name, expires_at) VALUES (%s, UTC_TIMESTAMP(6))",
                (MySqlNamedLock.server_name(names[3]),),
            )
        answers = lock.try_claim_many([(name, 60) for name in names[1:]])
        assert all(isinstance(answer, LockBackendError) for answer in answers), answers
        assert "Lock wait timeout" in str(answers[0])
        blocker.rollback()
        assert _claimed(reader, names) == [names[0]]
        # Nothing of the failed batch is held open: the same names are claimed now.
        assert lock.try_claim_many([(name, 60) for name in names[1:]]) == [True] * 5
        assert _claimed(reader, names) == names
    finally:
        blocker.close()
        reader.close()
        lock.close()


def test_a_batch_creates_a_missing_claims_table(mysql_url: str) -> None:
    reader = _reader(mysql_url)
    lock = MySqlNamedLock(mysql_url)
    try:
        with reader.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {sql.CLAIM_TABLE}")
        names = _names("create", 4)
        assert lock.try_claim_many([(name, 60) for name in names]) == [True] * 4
        assert _claimed(reader, names) == names
    finally:
        reader.close()
        lock.close()


def test_claims_are_answered_in_the_order_given_whatever_the_order_sent(
    mysql_url: str,
) -> None:
    lock = MySqlNamedLock(mysql_url)
    other = MySqlNamedLock(mysql_url)
    try:
        names = _names("order", 8)
        taken = {names[1], names[4], names[6]}
        assert other.try_claim_many([(name, 60) for name in sorted(taken)]) == [True] * 3
        shuffled = [names[index] for index in (5, 1, 7, 0, 6, 3, 4, 2)]
        answers = lock.try_claim_many([(name, 60) for name in shuffled])
        assert answers == [name not in taken for name in shuffled]
    finally:
        other.close()
        lock.close()
