"""`MySqlNamedLock`: MySQL/MariaDB `GET_LOCK` named locks on a dedicated connection.

Each instance owns one autocommit connection (a server session). A lock is
`GET_LOCK(server_name, 0)` in that session and lives until `RELEASE_LOCK` or until the
session ends, so the TTL is accepted and ignored. The connection is kept for reuse:
a reconnect per acquisition would multiply the cost of a cycle.

Limits, stated once here and in the docs page:

* Server lock names are at most 64 characters, and MySQL 5.7+ compares them
  case-insensitively. A name is used as it is only when it is short and made of
  lower-case ASCII letters, digits and `_ . : / -`; every other name becomes
  `firefly:` + its SHA-1, so two distinct names never share a server lock.
* Named locks belong to one server. They are not replicated: after a failover the
  promoted replica holds none of them. Galera refuses them outright.
* A proxy that multiplexes sessions (ProxySQL, a transaction pooler) hands the session
  to other clients between statements, which breaks session locks; connect directly.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
from typing import Any, ClassVar, Final, TypeAlias
from urllib.parse import unquote, urlsplit

import pymysql
from pymysql.connections import Connection as PyMySqlConnection
from pymysql.constants import CR, ER
from pymysql.cursors import Cursor

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.keys import ServerKeyScheme
from firefly_scheduling.locks.redaction import redact_url, scrub, url_secrets
from firefly_scheduling.locks.session import SessionLock
from firefly_scheduling.locks.validation import validate_lock_name
from firefly_scheduling_mysql.connection_options import connection_arguments

# PyMySQL's Connection is generic only in its stubs, hence the string.
Connection: TypeAlias = "PyMySqlConnection[Cursor]"

#: Only these names are sent as they are: no case, no spaces, no characters a
#: collation could fold together, so distinct readable names are distinct server names.
SERVER_NAMES: Final = ServerKeyScheme(
    readable_prefix="",
    hashed_prefix="firefly:",
    max_length=64,
    readable=re.compile(r"[a-z0-9_.:/-]+"),
    digest="sha1",
)

#: Counters behind fencing tokens: one row per server name, created on first fenced use.
FENCE_TABLE: Final = "firefly_scheduling_fences"

#: Oldest servers whose session can hold several named locks at once. MySQL 5.6 and
#: older silently release a session's lock when it takes another one.
MINIMUM_VERSION: Final = (5, 7)

# Server errors meaning "this server lacks the feature": a parse error or an unknown
# function (a MySQL look-alike), or "not supported yet" (MariaDB Galera with wsrep_on).
_UNSUPPORTED_ERRORS: Final = frozenset(
    {ER.PARSE_ERROR, ER.SYNTAX_ERROR, ER.SP_DOES_NOT_EXIST, ER.NOT_SUPPORTED_YET}
)
_PROBE: Final = "SELECT VERSION(), IS_USED_LOCK(%s)"
_PROBE_NAME: Final = "firefly:probe"
# A session that holds a lock idles by design; the default wait_timeout (8 h) would
# end it and free the lock. 31536000 s is the largest value the server accepts.
_SESSION_SETUP: Final = "SET SESSION wait_timeout = 31536000"
_GET_LOCK: Final = "SELECT GET_LOCK(%s, 0)"
_RELEASE_LOCK: Final = "SELECT RELEASE_LOCK(%s)"
_HOLDS: Final = "SELECT IS_USED_LOCK(%s) = CONNECTION_ID()"
# VARBINARY compares bytes: no collation can merge two server names.
_CREATE_FENCES: Final = (
    f"CREATE TABLE IF NOT EXISTS {FENCE_TABLE}"
    " (name VARBINARY(64) NOT NULL PRIMARY KEY, value BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"
)
# LAST_INSERT_ID(expr) puts the new value in the OK packet (cursor.lastrowid), so one
# round trip both increments and reads it. The table name is a constant, never input.
_NEXT_FENCE: Final = (
    f"INSERT INTO {FENCE_TABLE} (name, value) VALUES (%s, LAST_INSERT_ID(1))"  # noqa: S608 - constant
    " ON DUPLICATE KEY UPDATE value = LAST_INSERT_ID(value + 1)"
)
# Lock and fence in one statement, so one round trip: the row is written (and the OK
# packet carries the new value) only when GET_LOCK won. A missing table is reported
# when the statement opens its tables, before GET_LOCK runs, so no lock is taken then.
_GET_LOCK_AND_FENCE: Final = (
    f"INSERT INTO {FENCE_TABLE} (name, value)"  # noqa: S608 - constant
    " SELECT %(name)s, LAST_INSERT_ID(1) FROM DUAL WHERE GET_LOCK(%(name)s, 0) = 1"
    " ON DUPLICATE KEY UPDATE value = LAST_INSERT_ID(value + 1)"
)
_LAST_FENCE: Final = "SELECT LAST_INSERT_ID()"

#: Fire claims: one row per claimed fire (by server name), expiring by the server's UTC
#: clock (UTC_TIMESTAMP, so no session time zone can shift it), created on first use.
CLAIM_TABLE: Final = "firefly_scheduling_claims"
_CREATE_CLAIMS: Final = (
    f"CREATE TABLE IF NOT EXISTS {CLAIM_TABLE}"
    " (name VARBINARY(64) NOT NULL PRIMARY KEY, expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB"
)
# One statement. Affected rows: 1 inserted, 2 an expired row taken over, 0 a live row
# left alone (PyMySQL does not set CLIENT_FOUND_ROWS, which would count it as 1).
_CLAIM: Final = (
    f"INSERT INTO {CLAIM_TABLE} (name, expires_at)"  # noqa: S608 - constant
    " VALUES (%(name)s, UTC_TIMESTAMP(6) + INTERVAL %(micros)s MICROSECOND)"
    " ON DUPLICATE KEY UPDATE expires_at = IF(expires_at <= UTC_TIMESTAMP(6),"
    " UTC_TIMESTAMP(6) + INTERVAL %(micros)s MICROSECOND, expires_at)"
)
_SWEEP_CLAIMS: Final = f"DELETE FROM {CLAIM_TABLE} WHERE expires_at <= UTC_TIMESTAMP(6) LIMIT 10000"  # noqa: S608
_PROTOCOL_VERSION: Final = 10  # every MySQL and MariaDB since 3.21
_VERSION: Final = re.compile(r"(\d+)\.(\d+)")


class MySqlNamedLock(SessionLock[Connection]):
    """A MySQL/MariaDB named lock per lock name, held by this instance's own session.

    `url` is `mysql://` or `mariadb://` (`user:password@host:port/database`, optional
    `?unix_socket=`, `charset=`, timeouts and `ssl_*`); any other kind is a
    `ConfigurationError` here, before anything connects. The connection opens on first
    use and is reused; if it dies, the call raises `LockBackendError`, every lock it
    held is reported lost, and the next call reconnects. A server that is not MySQL
    5.7+ or MariaDB is a `ConfigurationError` on first acquisition. Not re-entrant,
    although the server lock is: the second `try_acquire` of a held name is refused
    before any statement is sent, so the server's count never exceeds one.
    """

    backend_name: ClassVar[str] = "mysql"
    supports_fencing: ClassVar[bool] = True
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (pymysql.MySQLError, OSError)

    def __init__(self, url: str) -> None:
        self._arguments = connection_arguments(url)
        url = url.strip()
        password = urlsplit(url).password
        decoded = (unquote(password),) if password else ()
        super().__init__(target=redact_url(url), secrets=url_secrets(url) + decoded)

    @staticmethod
    def server_name(name: str) -> str:
        """The server lock name of `name`: `name` itself when safe, else `firefly:<sha1>`.

        Identical on every node. At most 64 characters, and two distinct names never
        map to server names that MySQL or MariaDB would consider equal.
        """
        return _server_name(validate_lock_name(name))

    # -- SessionLock hooks ----------------------------------------------------------

    def _connect(self) -> Connection:
        connection: Connection = PyMySqlConnection(
            **self._arguments, autocommit=True, defer_connect=True
        )
        try:
            connection.connect()
        except pymysql.err.OperationalError as err:
            if _greeted(connection) or err.args[0] != CR.CR_SERVER_LOST:
                raise  # refused after greeting (credentials, limits), or nothing listens
            # Accepted, then silence or a hang-up: MySQL greets at once, so the server is
            # overloaded, or is not MySQL at all; the two cannot be told apart from here.
            timeout = self._arguments["read_timeout"]
            raise pymysql.err.OperationalError(
                CR.CR_SERVER_LOST,
                f"no MySQL greeting (waited up to {timeout:g} s): the server is overloaded "
                "or went away, or it is not a MySQL or MariaDB server",
            ) from err
        except Exception as err:  # a garbled greeting fails in many ways, not all PyMySQL's
            if not _greeted(connection):
                raise self._not_mysql(
                    f"its greeting is not MySQL's ({self._describe(err)})"
                ) from err
            if isinstance(err, pymysql.MySQLError):
                raise
            # The driver itself gave up, e.g. MySQL 8's caching_sha2_password over plain
            # TCP needs the `cryptography` package for the first login.
            raise ConfigurationError(
                f"the mysql lock provider could not log in to {self._target}: {self._describe(err)}"
            ) from err
        try:
            self._check_server(connection)
            with connection.cursor() as cursor:
                cursor.execute(_SESSION_SETUP)
        except BaseException:
            self._disconnect(connection)
            raise
        return connection

    def _disconnect(self, connection: Connection) -> None:
        with contextlib.suppress(*self.driver_errors):  # already dead: closing is all we want
            connection.close()

    def _server_acquire(self, connection: Connection, name: str) -> bool:
        try:
            return bool(_scalar(connection, _GET_LOCK, _server_name(name)) == 1)
        except pymysql.MySQLError as err:
            if err.args and err.args[0] in _UNSUPPORTED_ERRORS:
                raise self._not_mysql(f"GET_LOCK failed ({self._describe(err)})") from err
            raise

    def _server_release(self, connection: Connection, name: str) -> bool:
        # 1: released; 0: held by another session; NULL: no such lock (ours was lost).
        return bool(_scalar(connection, _RELEASE_LOCK, _server_name(name)) == 1)

    def _server_holds(self, connection: Connection, name: str) -> bool:
        return bool(_scalar(connection, _HOLDS, _server_name(name)) == 1)

    def _server_fence(self, connection: Connection, name: str) -> int:
        token = self._fence_statement(connection, _NEXT_FENCE, (_server_name(name),))
        if token is None:
            raise pymysql.err.InterfaceError("the fence counter changed no row")
        return token

    def _server_acquire_fenced(self, connection: Connection, name: str) -> int | None:
        """GET_LOCK and the counter increment in one statement: one round trip."""
        parameters = {"name": _server_name(name)}
        return self._fence_statement(connection, _GET_LOCK_AND_FENCE, parameters)

    def _server_claim(self, connection: Connection, name: str, seconds: float) -> bool:
        parameters = {"name": _server_name(name), "micros": math.ceil(seconds * 1_000_000)}
        with connection.cursor() as cursor:
            _execute_creating(cursor, _CREATE_CLAIMS, _CLAIM, parameters)
            return cursor.rowcount in (1, 2)

    def _server_sweep_claims(self, connection: Connection) -> int:
        with connection.cursor() as cursor:
            _execute_creating(cursor, _CREATE_CLAIMS, _SWEEP_CLAIMS, None)
            return max(cursor.rowcount, 0)

    def _alive(self, connection: Connection) -> bool:
        # PyMySQL closes its socket on a lost connection, never on a statement's error.
        return bool(connection.open)

    # -- helpers ----------------------------------------------------------------------

    def _fence_statement(
        self, connection: Connection, statement: str, parameters: tuple[str] | dict[str, str]
    ) -> int | None:
        """Run an increment of a fence counter; its new value, or None if it wrote no row.

        Creates the table on first use: a missing table is reported before the
        statement runs anything, so running it again is safe.
        """
        with connection.cursor() as cursor:
            try:
                _execute_creating(cursor, _CREATE_FENCES, statement, parameters)
            except pymysql.MySQLError as err:
                if err.args and err.args[0] in _UNSUPPORTED_ERRORS:
                    raise self._not_mysql(f"GET_LOCK failed ({self._describe(err)})") from err
                raise
            if cursor.rowcount < 1:
                return None
            if cursor.lastrowid > 0:
                return cursor.lastrowid
        # A server that leaves LAST_INSERT_ID(expr) out of the OK packet: ask for it.
        return int(_scalar(connection, _LAST_FENCE))

    def _check_server(self, connection: Connection) -> None:
        """Refuse a server that speaks the protocol but cannot hold our named locks."""
        try:
            version = str(_scalar(connection, _PROBE, _PROBE_NAME))
        except pymysql.MySQLError as err:
            if err.args and err.args[0] in _UNSUPPORTED_ERRORS:
                raise self._not_mysql(f"it lacks IS_USED_LOCK ({self._describe(err)})") from err
            raise
        problem = unsupported_version(version)
        if problem:
            raise self._not_mysql(problem)

    def _not_mysql(self, reason: str) -> ConfigurationError:
        return ConfigurationError(
            f"the mysql lock provider needs MySQL {MINIMUM_VERSION[0]}.{MINIMUM_VERSION[1]}+ "
            f"or MariaDB, but the server at {self._target} cannot serve: "
            f"{scrub(reason, self._secrets)}"
        )


@functools.lru_cache(maxsize=4096)
def _server_name(name: str) -> str:
    # The hooks get names BaseLock already validated. A scheduler asks for the same few
    # names every cycle, and a cache hit skips the pattern match and the hash.
    return SERVER_NAMES.key(name)


def unsupported_version(version: str) -> str | None:
    """Why a server reporting `VERSION() = version` cannot serve, or None if it can.

    MariaDB reports 10.0 or later and qualifies. MySQL must be 5.7 or later: older
    sessions hold at most one named lock, and taking a second silently frees the first.
    """
    match = _VERSION.match(version)
    if match is None:
        return f"it reports version {version!r}, which is not a MySQL or MariaDB version"
    if (int(match[1]), int(match[2])) < MINIMUM_VERSION:
        return f"version {version} holds at most one named lock per session"
    return None


def _execute_creating(cursor: Cursor, create: str, statement: str, parameters: object) -> None:
    """Run `statement`; when its table is missing, create it (`create`) and run it again.

    A missing table is reported when the statement opens its tables, before it runs
    anything (GET_LOCK included), so running it again is safe; racing creators are
    harmless (`IF NOT EXISTS`).
    """
    try:
        cursor.execute(statement, parameters)
    except pymysql.MySQLError as err:
        if not err.args or err.args[0] != ER.NO_SUCH_TABLE:
            raise
        cursor.execute(create)
        cursor.execute(statement, parameters)


def _greeted(connection: Connection) -> bool:
    """Whether a MySQL greeting (protocol version 10) was read; PyMySQL keeps its fields."""
    return getattr(connection, "protocol_version", None) == _PROTOCOL_VERSION


def _scalar(connection: Connection, statement: str, *args: Any) -> Any:
    """The first column of the one row `statement` returns."""
    with connection.cursor() as cursor:
        cursor.execute(statement, args or None)
        row = cursor.fetchone()
    if row is None:
        raise pymysql.err.InterfaceError("the server returned no row for a single-row query")
    return row[0]
