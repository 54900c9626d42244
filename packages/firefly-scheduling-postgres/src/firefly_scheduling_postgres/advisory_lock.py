"""`PgAdvisoryLock`: PostgreSQL session-level advisory locks on a dedicated connection.

Each instance owns one autocommit connection (a server session). A lock is
`pg_try_advisory_lock(key)` in that session and lives until `pg_advisory_unlock`
or until the session ends, so the TTL is accepted and ignored. The connection is
kept for reuse: a reconnect per acquisition would multiply the cost of a cycle.

Limits (docs/backends/postgres.md says more):

* A lock name becomes a 60-bit key (`PgAdvisoryLock.key`), the PHP original's formula,
  so PHP and Python nodes agree. Two distinct names that hash to the same key share
  one lock; with n names in use the odds are about n**2 / 2**61.
* Advisory locks belong to one server. They are not replicated: after a failover the
  promoted replica holds none of them.
* A transaction-mode pooler (PgBouncer `pool_mode = transaction`) hands the session to
  other clients between statements, which breaks session locks; connect directly or
  through session pooling.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Callable
from typing import Any, ClassVar, Final

import psycopg
from psycopg import errors as pg_errors

from firefly_scheduling.locks.session import SessionLock
from firefly_scheduling_postgres.connection_string import PostgresConnection

#: The session handle: a cursor kept open on the dedicated connection. Reusing one cursor
#: instead of `connection.execute()` (a new cursor per statement) saves about a fifth of
#: the client's CPU per round trip.
Session = psycopg.Cursor[tuple[Any, ...]]

#: Counters behind fencing tokens: one row per lock name, created on first fenced use.
FENCE_TABLE: Final = "firefly_scheduling_fences"
#: Fire claims: one row per claimed fire, expiring by the server's clock, created on first use.
CLAIM_TABLE: Final = "firefly_scheduling_claims"

# Run once per new session. A statement_timeout already set by the role, the database or
# the URL's `options` is kept; only an unbounded one is bounded. The server-side TCP
# keepalives let the server end the session (and free its locks) about a minute after the
# node's host vanished, instead of the operating system's default of over two hours.
_SESSION_SETUP: Final = (
    "SELECT CASE WHEN current_setting('statement_timeout') = '0'"
    " THEN set_config('statement_timeout', '5s', false) END,"
    " set_config('tcp_keepalives_idle', '30', false),"
    " set_config('tcp_keepalives_interval', '10', false),"
    " set_config('tcp_keepalives_count', '3', false)"
)
# PostgreSQL 14+ may end idle sessions; a session that holds a lock idles by design.
_SESSION_SETUP_14: Final = _SESSION_SETUP + ", set_config('idle_session_timeout', '0', false)"

_TRY_LOCK: Final = "SELECT pg_try_advisory_lock(%s)"
_UNLOCK: Final = "SELECT pg_advisory_unlock(%s)"
# A bigint advisory key appears in pg_locks split into two unsigned 32-bit halves, with
# objsubid 1 (the two-int4 form uses 2, so it is a different lock).
_HOLDS: Final = (
    "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'"
    " AND pid = pg_backend_pid() AND classid = %s::oid AND objid = %s::oid"
    " AND objsubid = 1 AND granted)"
)
_CREATE_FENCES: Final = (
    f"CREATE TABLE IF NOT EXISTS {FENCE_TABLE}"
    ' (name text COLLATE "C" PRIMARY KEY, value bigint NOT NULL)'
)
# The table name is the constant FENCE_TABLE, never input, so the f-strings are safe.
_NEXT_FENCE: Final = (
    f"INSERT INTO {FENCE_TABLE} AS fence (name, value) VALUES (%s, 1)"  # noqa: S608 - constant
    " ON CONFLICT (name) DO UPDATE SET value = fence.value + 1 RETURNING fence.value"
)
# Lock and fence in one round trip: a row comes back only when the lock was won. The
# volatile function keeps the CTE from being inlined, so it runs exactly once.
_TRY_LOCK_AND_FENCE: Final = (
    "WITH attempt AS (SELECT pg_try_advisory_lock(%(key)s) AS won)"  # noqa: S608 - constant
    f" INSERT INTO {FENCE_TABLE} AS fence (name, value)"
    " SELECT %(name)s, 1 FROM attempt WHERE attempt.won"
    " ON CONFLICT (name) DO UPDATE SET value = fence.value + 1 RETURNING fence.value"
)


_CREATE_CLAIMS: Final = (
    f"CREATE TABLE IF NOT EXISTS {CLAIM_TABLE}"
    ' (name text COLLATE "C" PRIMARY KEY, expires_at timestamptz NOT NULL)'
)
# One statement: a new row, or an expired row taken over; RETURNING yields a row only
# then. `now()` is the server's clock (the statement's transaction start, in autocommit).
_CLAIM: Final = (
    f"INSERT INTO {CLAIM_TABLE} AS claim (name, expires_at)"  # noqa: S608 - constant
    " VALUES (%(name)s, now() + make_interval(secs => %(seconds)s))"
    " ON CONFLICT (name) DO UPDATE SET expires_at = EXCLUDED.expires_at"
    " WHERE claim.expires_at <= now() RETURNING 1"
)
_SWEEP_CLAIMS: Final = f"DELETE FROM {CLAIM_TABLE} WHERE expires_at <= now()"  # noqa: S608


class PgAdvisoryLock(SessionLock[Session]):
    """A PostgreSQL advisory lock per name, held by this instance's own session.

    `url` is a libpq URL (`postgresql://` or `postgres://`) or a libpq key=value
    string (`host=db dbname=app user=app password=secret`); anything else, or a string
    libpq cannot read, is a `ConfigurationError` here, before anything connects, and
    shows no credential (see `connection_string`). The connection opens on first
    use and is reused; if it dies, the call raises `LockBackendError`, every lock it
    held is reported lost, and the next call reconnects. Not re-entrant, although the
    server lock is: the second `try_acquire` of a held name is refused before any
    statement is sent, so the server's count never exceeds one.
    """

    backend_name: ClassVar[str] = "postgres"
    supports_fencing: ClassVar[bool] = True
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (psycopg.Error, OSError)

    def __init__(self, url: str) -> None:
        connection = PostgresConnection.parse(url)
        super().__init__(target=connection.shown, secrets=connection.secrets)
        self._conninfo = connection.conninfo

    @staticmethod
    def key(name: str) -> int:
        """The advisory-lock key of `name`: the PHP original's formula, in [-2**59, 2**59).

        Only 60 of SHA-256's bits are kept, so distinct names can share a key (and then
        a lock) with a probability of about n**2 / 2**61 for n names in use.
        """
        return _advisory_key(name)

    # -- SessionLock hooks ----------------------------------------------------------

    def _connect(self) -> Session:
        connection = psycopg.connect(self._conninfo, autocommit=True)
        try:
            session = connection.cursor()
            modern = connection.info.server_version >= 140000
            session.execute(_SESSION_SETUP_14 if modern else _SESSION_SETUP)
        except BaseException:
            connection.close()
            raise
        return session

    def _disconnect(self, session: Session) -> None:
        with contextlib.suppress(*self.driver_errors):  # already dead: closing is all we want
            session.connection.close()

    def _server_acquire(self, session: Session, name: str) -> bool:
        return bool(_scalar(session.execute(_TRY_LOCK, (self.key(name),))))

    def _server_release(self, session: Session, name: str) -> bool:
        return bool(_scalar(session.execute(_UNLOCK, (self.key(name),))))

    def _server_holds(self, session: Session, name: str) -> bool:
        unsigned = self.key(name) & 0xFFFF_FFFF_FFFF_FFFF
        halves = (unsigned >> 32, unsigned & 0xFFFF_FFFF)
        return bool(_scalar(session.execute(_HOLDS, halves)))

    def _server_fence(self, session: Session, name: str) -> int:
        token = self._fence_statement(session, _NEXT_FENCE, (name,))
        if token is None:
            raise psycopg.InterfaceError("the fence counter returned no row")
        return token

    def _server_acquire_fenced(self, session: Session, name: str) -> int | None:
        params = {"key": self.key(name), "name": name}
        return self._fence_statement(session, _TRY_LOCK_AND_FENCE, params)

    def _server_claim(self, session: Session, name: str, seconds: float) -> bool:
        params = {"name": name, "seconds": seconds}
        rows = _creating(session, _CREATE_CLAIMS, lambda: session.execute(_CLAIM, params))
        return rows.fetchone() is not None

    def _server_sweep_claims(self, session: Session) -> int:
        rows = _creating(session, _CREATE_CLAIMS, lambda: session.execute(_SWEEP_CLAIMS))
        return max(rows.rowcount, 0)

    def _alive(self, session: Session) -> bool:
        connection = session.connection
        return not (connection.closed or connection.broken)

    # -- helpers ----------------------------------------------------------------------

    def _fence_statement(
        self, session: Session, query: str, params: tuple[Any, ...] | dict[str, Any]
    ) -> int | None:
        """Run a statement returning a fence value (or no row), creating the table first time."""
        row = _creating(session, _CREATE_FENCES, lambda: session.execute(query, params)).fetchone()
        return None if row is None else int(row[0])


def _creating(session: Session, create: str, statement: Callable[[], Session]) -> Session:
    """Run `statement`; when its table is missing, create it (`create`) and run it again.

    A missing table is reported while the statement is analysed, before anything
    runs, so no advisory lock was taken and running it again is safe.
    """
    try:
        return statement()
    except pg_errors.UndefinedTable:
        # Two sessions may race to create it; the loser's error means it now exists.
        # Which error the loser gets depends on where the catalogs collide: the table
        # (DuplicateTable), its row type (DuplicateObject) or a catalog index
        # (UniqueViolation).
        with contextlib.suppress(
            pg_errors.DuplicateTable, pg_errors.DuplicateObject, pg_errors.UniqueViolation
        ):
            session.execute(create)
        return statement()


@functools.lru_cache(maxsize=1024)
def _advisory_key(name: str) -> int:
    # Cached: a scheduler takes the same few names over and over.
    try:
        encoded = name.encode()
    except UnicodeEncodeError as err:
        raise ValueError(f"lock name {name!r} cannot be encoded as UTF-8: {err}") from None
    return int(hashlib.sha256(encoded).hexdigest()[:15], 16) - 2**59


def _scalar(cursor: Session) -> Any:
    row = cursor.fetchone()
    if row is None:
        raise psycopg.InterfaceError("the server returned no row for a single-value query")
    return row[0]
