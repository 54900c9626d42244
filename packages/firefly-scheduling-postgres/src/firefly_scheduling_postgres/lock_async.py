"""`AsyncPgAdvisoryLock`: PostgreSQL session-level advisory locks on dedicated connections.

Each instance owns a small pool of autocommit connections (server sessions; see
`aio.session`). A lock is `pg_try_advisory_lock(key)` in one of them and lives until
`pg_advisory_unlock` in the same session or until that session ends, so the TTL is
accepted and ignored. The connections are kept for reuse: a reconnect per
acquisition would multiply the cost of a cycle.

Written once, for asyncio (psycopg 3's `AsyncConnection`), in `lock_async.py`;
the synchronous `PgAdvisoryLock` in `lock.py` is generated from it by
`tools/async_to_sync.py`. Both send the statements of `protocol`, so the two
flavours exclude each other on the same name.

Limits (docs/backends/postgres.md says more):

* A lock name becomes a 60-bit key (`AsyncPgAdvisoryLock.key`), the PHP original's
  formula, so PHP and Python nodes agree. Two distinct names that hash to the same
  key share one lock; with n names in use the odds are about n**2 / 2**61.
* Advisory locks belong to one server. They are not replicated: after a failover the
  promoted replica holds none of them.
* A transaction-mode pooler (PgBouncer `pool_mode = transaction`) hands the session to
  other clients between statements, which breaks session locks; connect directly or
  through session pooling. For the same reason the lock never takes a connection
  from an application's pool (psycopg_pool, SQLAlchemy): it opens its own.
"""

# async-to-sync: rename AsyncPgAdvisoryLock PgAdvisoryLock
# async-to-sync: rename psycopg.AsyncCursor psycopg.Cursor
# async-to-sync: rename psycopg.AsyncConnection psycopg.Connection
# async-to-sync: rename AsyncBoundedConnection BoundedConnection

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import psycopg
from psycopg import errors as pg_errors

from firefly_scheduling.concurrency.connection_budget import budget_for
from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.locks.session_async import AsyncSessionLock
from firefly_scheduling_postgres import protocol as sql
from firefly_scheduling_postgres.bounded_connection import AsyncBoundedConnection
from firefly_scheduling_postgres.url import PostgresConnection

#: The session handle: a cursor kept open on the dedicated connection. Reusing one cursor
#: instead of `connection.execute()` (a new cursor per statement) saves about a fifth of
#: the client's CPU per round trip.
Session = psycopg.AsyncCursor[tuple[Any, ...]]

if ASYNC:  # noqa: SIM108 - the generated twin keeps the `else:` branch alone
    #: A statement sent on the session, returning the cursor with its result.
    _Sent = Callable[[], Awaitable[Session]]
else:
    #: A statement sent on the session, returning the cursor with its result.
    _Sent = Callable[[], Session]


class AsyncPgAdvisoryLock(AsyncSessionLock[Session]):
    """A PostgreSQL advisory lock per name, held by this instance's own session.

    `url` is a libpq URL (`postgresql://` or `postgres://`) or a libpq key=value
    string (`host=db dbname=app user=app password=secret`); anything else, or a string
    libpq cannot read, is a `ConfigurationError` here, before anything connects, and
    shows no credential (see `url`).

    `max_connections` (or the URL's `max_connections` query parameter; default 4) is
    the node's budget for this server, shared with the run history and the anchor
    store (`locks.connection_budget`): the lock's pool gets half of it, 2 sessions by
    default. Sessions open on first use and are reused; if one dies, the call raises
    `LockBackendError`, every lock THAT session held is reported lost, and its next
    use reconnects. Not re-entrant, although the server lock is: the second
    `try_acquire` of a held name is refused before any statement is sent, so the
    server's count never exceeds one.
    """

    backend_name: ClassVar[str] = "postgres"
    supports_fencing: ClassVar[bool] = True
    #: `acquire_many` takes its locks in one statement, on one session.
    batch_acquires = True
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (psycopg.Error, OSError)
    if ASYNC:
        #: psycopg answers a cancelled statement by cancelling it on the server and reading
        #: its end, so the session survives (a cancel request that arrives after the
        #: statement ended is ignored by the server, never applied to the next one).
        cancel_safe_driver: ClassVar[bool] = True
    #: psycopg answers KeyboardInterrupt the same way: it cancels the statement on the
    #: server and reads its end, so the session survives.
    interrupt_safe_driver: ClassVar[bool] = True

    def __init__(self, url: str, *, max_connections: int | None = None) -> None:
        url, shares = budget_for(url, max_connections)
        connection = PostgresConnection.parse(url)
        super().__init__(target=connection.shown, secrets=connection.secrets, pool_size=shares.lock)
        self._conninfo = connection.conninfo

    @staticmethod
    def key(name: str) -> int:
        """The advisory-lock key of `name`: the PHP original's formula, in [-2**59, 2**59).

        Only 60 of SHA-256's bits are kept, so distinct names can share a key (and then
        a lock) with a probability of about n**2 / 2**61 for n names in use.
        """
        return sql.advisory_key(name)

    # -- AsyncSessionLock hooks -----------------------------------------------------------

    async def _connect(self) -> Session:
        connection = await AsyncBoundedConnection.connect(self._conninfo, autocommit=True)
        try:
            session = connection.cursor()
            await session.execute(sql.session_setup(connection.info.server_version))
        except BaseException:
            await connection.close()
            raise
        return session

    async def _disconnect(self, session: Session) -> None:
        with contextlib.suppress(*self.driver_errors):  # already dead: closing is all we want
            await session.connection.close()

    async def _server_acquire(self, session: Session, name: str) -> bool:
        return bool(await _scalar(await session.execute(sql.TRY_LOCK, (self.key(name),))))

    async def _server_acquire_waiting(self, session: Session, name: str, seconds: float) -> bool:
        try:
            await session.execute(sql.WAIT_LOCK, sql.wait_lock_parameters(self.key(name), seconds))
        except (pg_errors.LockNotAvailable, pg_errors.QueryCanceled):
            # The lock timeout passed (or a statement_timeout below it): still taken.
            return False
        return True

    async def _server_release(self, session: Session, name: str) -> bool:
        return bool(await _scalar(await session.execute(sql.UNLOCK, (self.key(name),))))

    async def _server_holds(self, session: Session, name: str) -> bool:
        halves = sql.holds_parameters(self.key(name))
        return bool(await _scalar(await session.execute(sql.HOLDS, halves)))

    async def _server_fence(self, session: Session, name: str) -> int:
        token = await self._fence_statement(session, sql.NEXT_FENCE, (name,))
        if token is None:
            raise psycopg.InterfaceError("the fence counter returned no row")
        return token

    async def _server_acquire_fenced(self, session: Session, name: str) -> int | None:
        parameters = sql.fenced_acquire_parameters(self.key(name), name)
        return await self._fence_statement(session, sql.TRY_LOCK_AND_FENCE, parameters)

    async def _server_holds_many(self, session: Session, names: Sequence[str]) -> list[bool]:
        rows = await session.execute(sql.HOLDS_MANY, sql.holds_many_parameters(names))
        return sql.by_place(await rows.fetchall(), len(names))

    async def _server_release_many(self, session: Session, names: Sequence[str]) -> list[bool]:
        rows = await session.execute(sql.UNLOCK_MANY, sql.unlock_many_parameters(names))
        return sql.by_place(await rows.fetchall(), len(names))

    async def _server_acquire_many(
        self, session: Session, names: Sequence[str], *, fenced: bool
    ) -> dict[str, int | bool]:
        parameters = sql.acquire_many_parameters(names)
        if not fenced:
            rows = await session.execute(sql.TRY_LOCK_MANY, parameters)
            return {str(name): True for (name,) in await rows.fetchall()}
        rows = await _creating(
            session,
            sql.CREATE_FENCES,
            lambda: session.execute(sql.TRY_LOCK_AND_FENCE_MANY, parameters),
        )
        return {str(name): int(value) for name, value in await rows.fetchall()}

    async def _server_claim(self, session: Session, name: str, seconds: float) -> bool:
        parameters = sql.claim_parameters(name, seconds)
        rows = await _creating(
            session, sql.CREATE_CLAIMS, lambda: session.execute(sql.CLAIM, parameters)
        )
        return await rows.fetchone() is not None

    async def _server_claim_many(
        self, session: Session, claims: Sequence[tuple[str, float]]
    ) -> list[bool]:
        parameters = sql.claim_many_parameters(claims)
        rows = await _creating(
            session, sql.CREATE_CLAIMS, lambda: session.execute(sql.CLAIM_MANY, parameters)
        )
        won = {name for (name,) in await rows.fetchall()}
        return [name in won for name, _ in claims]

    async def _server_sweep_claims(self, session: Session) -> int:
        rows = await _creating(
            session, sql.CREATE_CLAIMS, lambda: session.execute(sql.SWEEP_CLAIMS)
        )
        return max(rows.rowcount, 0)

    def _alive(self, session: Session) -> bool:
        connection = session.connection
        return not (connection.closed or connection.broken)

    # -- helpers ----------------------------------------------------------------------

    async def _fence_statement(
        self, session: Session, query: str, parameters: tuple[Any, ...] | dict[str, Any]
    ) -> int | None:
        """Run a statement returning a fence value (or no row), creating the table first time."""
        rows = await _creating(
            session, sql.CREATE_FENCES, lambda: session.execute(query, parameters)
        )
        row = await rows.fetchone()
        return None if row is None else int(row[0])


async def _creating(session: Session, create: str, statement: _Sent) -> Session:
    """Run `statement`; when its table is missing, create it (`create`) and run it again.

    A missing table is reported while the statement is analysed, before anything
    runs, so no advisory lock was taken and running it again is safe.
    """
    try:
        return await statement()
    except pg_errors.UndefinedTable:
        # Two sessions may race to create it; the loser's error means it now exists.
        # Which error the loser gets depends on where the catalogs collide: the table
        # (DuplicateTable), its row type (DuplicateObject) or a catalog index
        # (UniqueViolation).
        with contextlib.suppress(
            pg_errors.DuplicateTable, pg_errors.DuplicateObject, pg_errors.UniqueViolation
        ):
            await session.execute(create)
        return await statement()


async def _scalar(cursor: Session) -> Any:
    row = await cursor.fetchone()
    if row is None:
        raise psycopg.InterfaceError("the server returned no row for a single-value query")
    return row[0]
