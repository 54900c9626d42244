# Generated from lock_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`MySqlNamedLock`: MySQL/MariaDB `GET_LOCK` named locks on dedicated connections.

Each instance owns a small pool of autocommit connections (server sessions; see
`aio.session`). A lock is `GET_LOCK(server_name, 0)` in one of them and lives until
`RELEASE_LOCK` in the same session or until that session ends, so the TTL is accepted
and ignored. The connections are kept for reuse: a reconnect per acquisition would
multiply the cost of a cycle.

Written once, for asyncio (asyncmy), in `lock_async.py`; the synchronous
`MySqlNamedLock` (PyMySQL) in `lock.py` is generated from it by
`tools/async_to_sync.py`. Both send the statements of `protocol`, so the two
flavours exclude each other on the same name; what differs between their drivers is
`driver_async`'s. asyncmy was chosen over aiomysql by
measurement (benchmarks/async_suites/mysql.py and docs/backends/mysql.md).

Limits, stated once here and in the docs page:

* Server lock names are at most 64 characters, and MySQL 5.7+ compares them
  case-insensitively. A name is used as it is only when it is short and made of
  lower-case ASCII letters, digits and `_ . : / -`; every other name becomes
  `firefly:` + its SHA-1, so two distinct names never share a server lock.
* Named locks belong to one server. They are not replicated: after a failover the
  promoted replica holds none of them. Galera refuses them outright.
* A proxy that multiplexes sessions (ProxySQL, a transaction pooler) hands the session
  to other clients between statements, which breaks session locks; connect directly.
  For the same reason the lock never takes a connection from an application's pool.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import ClassVar

from pymysql.constants import CR

from firefly_scheduling.concurrency.connection_budget import budget_for
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.session import SessionLock
from firefly_scheduling.locks.validation import validate_lock_name
from firefly_scheduling.urls.redaction import scrub
from firefly_scheduling_mysql import protocol as sql
from firefly_scheduling_mysql.driver import (
    Connection,
    Cursor,
    InterfaceError,
    MySQLError,
    OperationalError,
    affected_rows,
    connection_alive,
    execute_creating,
    greeted,
    next_result,
    row_answers,
    scalar,
    server_text,
    unconnected,
)
from firefly_scheduling_mysql.url import (
    connection_arguments,
    shown_and_secrets,
)


class MySqlNamedLock(SessionLock[Connection]):
    """A MySQL/MariaDB named lock per lock name, held by this instance's own session.

    `url` is `mysql://` or `mariadb://` (`user:password@host:port/database`, optional
    `?unix_socket=`, `charset=`, timeouts, `ssl_*` and `max_connections`); any other
    kind is a `ConfigurationError` here, before anything connects.

    `max_connections` (or the URL's `max_connections` query parameter; default 4) is
    the node's budget for this server, shared with the run history and the anchor
    store (`locks.connection_budget`): the lock's pool gets half of it, 2 sessions by
    default. Sessions open on first use and are reused; if one dies, the call raises
    `LockBackendError`, every lock THAT session held is reported lost, and its next
    use reconnects. A server that is not MySQL
    5.7+ or MariaDB is a `ConfigurationError` on first acquisition. Not re-entrant,
    although the server lock is: the second `try_acquire` of a held name is refused
    before any statement is sent, so the server's count never exceeds one.
    """

    backend_name: ClassVar[str] = "mysql"
    supports_fencing: ClassVar[bool] = True
    #: `acquire_many` takes its locks in one statement (two when fenced), on one session.
    batch_acquires = True
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (MySQLError, OSError)

    def __init__(self, url: str, *, max_connections: int | None = None) -> None:
        url, shares = budget_for(url, max_connections)
        self._arguments = connection_arguments(url)
        shown, secrets = shown_and_secrets(url)
        super().__init__(target=shown, secrets=secrets, pool_size=shares.lock)

    @staticmethod
    def server_name(name: str) -> str:
        """The server lock name of `name`: `name` itself when safe, else `firefly:<sha1>`.

        Identical on every node. At most 64 characters, and two distinct names never
        map to server names that MySQL or MariaDB would consider equal.
        """
        return sql.server_name(validate_lock_name(name))

    # -- SessionLock hooks -----------------------------------------------------------

    def _connect(self) -> Connection:
        connection = unconnected(self._arguments)
        try:
            connection.connect()
        except OperationalError as err:
            if greeted(connection) or err.args[0] != CR.CR_SERVER_LOST:
                raise  # refused after greeting (credentials, limits), or nothing listens
            # Accepted, then silence or a hang-up: MySQL greets at once, so the server is
            # overloaded, or is not MySQL at all; the two cannot be told apart from here.
            timeout = self._arguments["read_timeout"]
            raise OperationalError(
                CR.CR_SERVER_LOST,
                f"no MySQL greeting (waited up to {timeout:g} s): the server is overloaded "
                "or went away, or it is not a MySQL or MariaDB server",
            ) from err
        except Exception as err:  # a garbled greeting fails in many ways, not all the driver's
            if not greeted(connection):
                raise self._not_mysql(
                    f"its greeting is not MySQL's ({self._describe(err)})"
                ) from err
            if isinstance(err, MySQLError):
                raise
            # The driver itself gave up, e.g. MySQL 8's caching_sha2_password over plain
            # TCP needs the `cryptography` package for the first login.
            raise ConfigurationError(
                f"the mysql lock provider could not log in to {self._target}: {self._describe(err)}"
            ) from err
        try:
            self._check_server(connection)
            with connection.cursor() as cursor:
                cursor.execute(sql.SESSION_SETUP)
        except BaseException:
            self._disconnect(connection)
            raise
        return connection

    def _disconnect(self, connection: Connection) -> None:
        # Closing the socket is enough: the server ends the session, and its locks, when
        # it sees the socket close. A polite QUIT could wait on a dead peer.
        with contextlib.suppress(*self.driver_errors):
            connection.close()

    def _server_acquire(self, connection: Connection, name: str) -> bool:
        try:
            return bool(scalar(connection, sql.GET_LOCK, sql.server_name(name)) == 1)
        except MySQLError as err:
            if err.args and err.args[0] in sql.UNSUPPORTED_ERRORS:
                raise self._not_mysql(f"GET_LOCK failed ({self._describe(err)})") from err
            raise

    def _server_acquire_waiting(self, connection: Connection, name: str, seconds: float) -> bool:
        server = sql.server_name(name)
        return bool(scalar(connection, sql.WAIT_LOCK, server, round(seconds, 3)) == 1)

    def _server_release(self, connection: Connection, name: str) -> bool:
        # 1: released; 0: held by another session; NULL: no such lock (ours was lost).
        return bool(scalar(connection, sql.RELEASE_LOCK, sql.server_name(name)) == 1)

    def _server_holds(self, connection: Connection, name: str) -> bool:
        return bool(scalar(connection, sql.HOLDS, sql.server_name(name)) == 1)

    def _server_holds_many(self, connection: Connection, names: Sequence[str]) -> list[bool]:
        servers = [sql.server_name(name) for name in names]
        return row_answers(connection, sql.holds_many(len(servers)), servers)

    def _server_release_many(self, connection: Connection, names: Sequence[str]) -> list[bool]:
        servers = [sql.server_name(name) for name in names]
        return row_answers(connection, sql.release_many(len(servers)), servers)

    def _server_fence(self, connection: Connection, name: str) -> int:
        token = self._fence_statement(connection, sql.NEXT_FENCE, (sql.server_name(name),))
        if token is None:
            raise InterfaceError("the fence counter changed no row")
        return token

    def _server_acquire_fenced(self, connection: Connection, name: str) -> int | None:
        """GET_LOCK and the counter increment in one statement: one round trip."""
        parameters = sql.fenced_acquire_parameters(name)
        return self._fence_statement(connection, sql.GET_LOCK_AND_FENCE, parameters)

    def _server_acquire_many(
        self, connection: Connection, names: Sequence[str], *, fenced: bool
    ) -> dict[str, int | bool]:
        """Every lock in one statement, and their tokens in a second when fenced."""
        statement, parameters = sql.acquire_many(names, fenced=fenced)
        if not fenced:
            answers = row_answers(connection, statement, parameters)
            return {name: True for name, won in zip(names, answers, strict=True) if won}
        with connection.cursor() as cursor:
            self._execute_fencing(cursor, statement, parameters)
            if affected_rows(cursor) < 1:
                return {}  # none won: nothing was written
            cursor.execute(sql.held_fences(len(parameters)), parameters)
            tokens = {server_text(server): int(value) for server, value in cursor.fetchall()}
        return {
            name: tokens[server]
            for name, server in zip(names, parameters, strict=True)
            if server in tokens
        }

    def _server_claim(self, connection: Connection, name: str, seconds: float) -> bool:
        parameters = sql.claim_parameters(name, seconds)
        with connection.cursor() as cursor:
            execute_creating(cursor, sql.CREATE_CLAIMS, sql.CLAIM, parameters)
            return affected_rows(cursor) in sql.CLAIM_WON

    def _server_claim_many(
        self, connection: Connection, claims: Sequence[tuple[str, float]]
    ) -> list[bool]:
        """Every claim in one round trip and one transaction (`sql.claim_many`), each
        answered by its own affected rows; the claims table is created if missing.

        One statement at a time kept the fires of an instant waiting for one round trip
        per claim in the claimer thread.
        """
        try:
            return self._claims_together(connection, claims)
        except MySQLError as err:
            if not err.args or err.args[0] != sql.NO_SUCH_TABLE:
                raise
        with connection.cursor() as cursor:
            cursor.execute(sql.CREATE_CLAIMS)
        return self._claims_together(connection, claims)

    def _claims_together(
        self, connection: Connection, claims: Sequence[tuple[str, float]]
    ) -> list[bool]:
        """`_server_claim_many`'s text, sent and read. An error stops the statements
        after it and is raised, as a single claim's would be; the transaction is rolled
        back first (a lock wait timeout leaves it open, its claimed rows locked), so
        none of the batch's claims stands."""
        statement, parameters, order = sql.claim_many(claims)
        answers = [False] * len(claims)
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement, parameters)
                for _ in range(sql.CLAIMS_PREAMBLE_RESULTS):
                    next_result(cursor)
                for place, index in enumerate(order):
                    if place:
                        next_result(cursor)
                    answers[index] = affected_rows(cursor) in sql.CLAIM_WON
                while cursor.nextset():  # the COMMIT's, which may fail too
                    pass
        except self.driver_errors:
            if connection_alive(connection):
                with contextlib.suppress(*self.driver_errors):
                    connection.rollback()
            raise
        return answers

    def _server_sweep_claims(self, connection: Connection) -> int:
        with connection.cursor() as cursor:
            execute_creating(cursor, sql.CREATE_CLAIMS, sql.SWEEP_CLAIMS, None)
            return max(affected_rows(cursor), 0)

    def _alive(self, connection: Connection) -> bool:
        return connection_alive(connection)

    # -- helpers ----------------------------------------------------------------------

    def _fence_statement(
        self, connection: Connection, statement: str, parameters: tuple[str] | dict[str, str]
    ) -> int | None:
        """Run an increment of a fence counter; its new value, or None if it wrote no row."""
        with connection.cursor() as cursor:
            self._execute_fencing(cursor, statement, parameters)
            if affected_rows(cursor) < 1:
                return None
            if cursor.lastrowid > 0:
                return int(cursor.lastrowid)
        # A server that leaves LAST_INSERT_ID(expr) out of the OK packet: ask for it.
        return int(scalar(connection, sql.LAST_FENCE))

    def _execute_fencing(self, cursor: Cursor, statement: str, parameters: object) -> None:
        """Run a statement that takes locks and moves fence counters.

        Creates the table on first use: a missing table is reported before the
        statement runs anything, so running it again is safe. A server without
        `GET_LOCK` (a MySQL look-alike) is a `ConfigurationError`.
        """
        try:
            execute_creating(cursor, sql.CREATE_FENCES, statement, parameters)
        except MySQLError as err:
            if err.args and err.args[0] in sql.UNSUPPORTED_ERRORS:
                raise self._not_mysql(f"GET_LOCK failed ({self._describe(err)})") from err
            raise

    def _check_server(self, connection: Connection) -> None:
        """Refuse a server that speaks the protocol but cannot hold our named locks."""
        try:
            version = str(scalar(connection, sql.PROBE, sql.PROBE_NAME))
        except MySQLError as err:
            if err.args and err.args[0] in sql.UNSUPPORTED_ERRORS:
                raise self._not_mysql(f"it lacks IS_USED_LOCK ({self._describe(err)})") from err
            raise
        problem = sql.unsupported_version(version)
        if problem:
            raise self._not_mysql(problem)

    def _not_mysql(self, reason: str) -> ConfigurationError:
        minimum = ".".join(str(part) for part in sql.MINIMUM_VERSION)
        return ConfigurationError(
            f"the mysql lock provider needs MySQL {minimum}+ "
            f"or MariaDB, but the server at {self._target} cannot serve: "
            f"{scrub(reason, self._secrets)}"
        )
