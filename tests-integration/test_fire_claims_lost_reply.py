"""A claim whose reply was lost must not read as "claimed elsewhere" on its retry.

Found by `benchmarks/chaos.py` (seed 777001, postgres): a node's claim `INSERT`
reached the server and committed, then a blackhole dropped the reply and reset the
connection. The session layer replaced the dead idle session and sent the claim
again, which met the row the first attempt had written, so the node reported
"claimed elsewhere"; so did every other node, and the fire was neither run nor
recorded. A claim is a row that outlives its session, so its retry is not
idempotent: a retry that finds the name claimed now raises `LockBackendError` (the
outcome is unknown), and the fire runner records the fire as skipped for it.

The fault is real: the claim commits on the real server, then a second client
terminates the claiming session, and the driver's own error for the next round trip
ends the attempt, as a lost reply does.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
import pymysql
import pytest

from firefly_scheduling import LockBackendError
from firefly_scheduling.locks import BaseLock
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql.url import connection_arguments
from firefly_scheduling_postgres import PgAdvisoryLock


class ReplyLostPostgres(PgAdvisoryLock):
    """Commits the claim, then loses its session before the caller hears of it."""

    lose_next_reply = True

    def _server_claim(self, session: Any, name: str, seconds: float) -> bool:
        won = super()._server_claim(session, name, seconds)
        self._lose_the_reply(session)
        return won

    def _server_claim_many(self, session: Any, claims: Sequence[tuple[str, float]]) -> list[bool]:
        won = super()._server_claim_many(session, claims)  # one statement for the batch
        self._lose_the_reply(session)
        return won

    def _lose_the_reply(self, session: Any) -> None:
        if self.lose_next_reply:
            self.lose_next_reply = False
            pid = session.connection.info.backend_pid
            with psycopg.connect(self.test_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            session.connection.execute("SELECT 1")  # the dead session's own error

    test_url = ""


class ReplyLostMySql(MySqlNamedLock):
    """Commits the claim, then loses its session before the caller hears of it."""

    lose_next_reply = True
    test_url = ""

    def _server_claim(self, connection: Any, name: str, seconds: float) -> bool:
        won = super()._server_claim(connection, name, seconds)
        self._lose_the_reply(connection)
        return won

    def _server_claim_many(
        self, connection: Any, claims: Sequence[tuple[str, float]]
    ) -> list[bool]:
        won = super()._server_claim_many(connection, claims)  # one round trip for the batch
        self._lose_the_reply(connection)
        return won

    def _lose_the_reply(self, connection: Any) -> None:
        if self.lose_next_reply:
            self.lose_next_reply = False
            admin = pymysql.connect(**connection_arguments(self.test_url), autocommit=True)
            with admin, admin.cursor() as cursor:
                cursor.execute("KILL %s", (connection.thread_id(),))
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")  # the dead session's own error


def _locks(backend: str, postgres_url: str, mysql_url: str) -> tuple[BaseLock, BaseLock]:
    if backend == "postgres":
        ReplyLostPostgres.test_url = postgres_url
        return ReplyLostPostgres(postgres_url), PgAdvisoryLock(postgres_url)
    ReplyLostMySql.test_url = mysql_url
    return ReplyLostMySql(mysql_url), MySqlNamedLock(mysql_url)


@pytest.mark.parametrize("backend", ["postgres", "mysql"])
def test_a_retried_claim_that_finds_its_own_row_is_an_error_not_a_loss(
    backend: str, postgres_url: str, mysql_url: str
) -> None:
    claimer, other = _locks(backend, postgres_url, mysql_url)
    name = f"lost-reply:{backend}:{uuid.uuid4().hex}"
    try:
        assert claimer.try_acquire(f"{name}:warm", 30)  # a live session, then idle again
        claimer.release(f"{name}:warm")
        with pytest.raises(LockBackendError, match="has an unknown outcome"):
            claimer.try_claim(name, 30)
        assert other.try_claim(name, 30) is False, "the first attempt's claim did not commit"
        assert claimer.try_claim(f"{name}:next", 30) is True, "the session did not recover"
    finally:
        claimer.close()
        other.close()


@pytest.mark.parametrize("backend", ["postgres", "mysql"])
def test_a_retried_batch_of_claims_reports_the_rows_it_finds_as_errors_not_losses(
    backend: str, postgres_url: str, mysql_url: str
) -> None:
    """The resident host's batch (`try_claim_many`): one statement on PostgreSQL, one
    round trip of one statement per claim on MySQL. The first attempt commits, its
    session dies before the reply; each claim the retry finds taken is unknown."""
    claimer, other = _locks(backend, postgres_url, mysql_url)
    base = f"lost-reply-batch:{backend}:{uuid.uuid4().hex}"
    names = [f"{base}:a", f"{base}:b"]
    try:
        assert claimer.try_acquire(f"{base}:warm", 30)
        claimer.release(f"{base}:warm")
        answers = claimer.try_claim_many([(name, 30) for name in names])
        assert False not in answers, f"a claim of its own was read as lost: {answers}"
        assert isinstance(answers[0], LockBackendError), answers
        assert "has an unknown outcome" in str(answers[0])
        for name in names:
            assert other.try_claim(name, 30) is False, "a claim of the batch did not commit"
        assert claimer.try_claim_many([(f"{base}:next", 30), (f"{base}:later", 30)]) == [
            True,
            True,
        ], "the session did not recover"
    finally:
        claimer.close()
        other.close()
