# Generated from lock_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`DatabaseLeaseLock`: a lease per name, kept as a row of an ordinary SQL table.

Written once, for asyncio, in `lock_async.py` on SQLAlchemy's asyncio extension;
the synchronous `DatabaseLeaseLock` in `lock.py` is generated from it by
`tools/async_to_sync.py`. Both send the same statements (`dialects`) to the same
tables (`schema`) and build their engines from the same URLs (`engine`), so a
fleet can mix sync and async nodes: the two exclude each other on the same name.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeAlias, TypeVar

from sqlalchemy import URL, Connection, Engine, inspect
from sqlalchemy.engine.interfaces import DBAPIModule
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import PoolProxiedConnection

from firefly_scheduling.concurrency.grouped import GroupedCalls
from firefly_scheduling.errors import ConfigurationError, LockBackendError
from firefly_scheduling.locks.base import BaseLock, new_owner_token
from firefly_scheduling_database.dialect_batches import (
    Bound,
    LeaseBatches,
    Request,
    lease_batches_for,
)
from firefly_scheduling_database.dialects import Statement, StatementResult, lease_sql_for
from firefly_scheduling_database.engine import describe_url, lock_engine
from firefly_scheduling_database.schema import DEFAULT_TABLE, LeaseTables, create_if_absent

_T = TypeVar("_T")

_Run: TypeAlias = Callable[[Statement, Mapping[str, object]], StatementResult]
_RunEach: TypeAlias = Callable[[Statement, Mapping[str, object]], list[int]]
_Operation: TypeAlias = Callable[["_Transaction"], _T]
_OnConnection: TypeAlias = Callable[[Connection], _T]

_ACCEPTED = "a URL, an Engine or a Connection"

logger = logging.getLogger("firefly_scheduling.locks")

#: Longest lease accepted: date types end at year 9999, and a century is "forever".
MAX_LEASE_SECONDS = 100 * 366 * 86_400
#: Seconds between two purges of expired leases by one instance (with up to 50 % jitter).
PURGE_INTERVAL_SECONDS = 60.0
#: Most releases sent in one statement (`_release_together`), where the dialect's
#: batches set no bound of their own (`LeaseBatches.most_releases`: MySQL's is lower).
RELEASES_PER_STATEMENT = 500


@dataclass(frozen=True)
class _Transaction:
    """Statements running inside one transaction, whichever way it was opened."""

    run: _Run
    #: The driver's own connection underneath, for capability checks (MySQL's flags).
    driver_connection: object
    #: A text of several statements, on the lock's own engine only (`_run_on_driver`,
    #: whose MySQL connections allow them): each statement's affected-row count.
    run_each: _RunEach | None = None


class DatabaseLeaseLock(BaseLock):
    """A lease lock in a table of SQLite, PostgreSQL or MySQL/MariaDB (SQLAlchemy 2).

    Each held name is a row carrying the acquisition's owner token and a
    `locked_until` instant from the DATABASE's clock; an expired row is taken over by
    the next acquirer, so a crashed holder frees its names after the TTL. Acquire,
    release and renew are one statement each (see `dialects`).

    Give it a URL (the lock builds and owns a pooled engine with bounded timeouts and a
    bounded pool, its share of `max_connections` (the argument or the URL's query
    parameter, 4 by default: 2 for the lock; see `locks.connection_budget`), in
    autocommit, and sends its statements straight to the pooled driver connection: one
    round trip per operation, see `_run_on_driver`), an `Engine`
    (each operation is its own short transaction on a pooled connection, through
    SQLAlchemy's execution layer, so the application's event listeners see it) or a
    connection (`Connection`). On a connection already inside a transaction every
    operation runs in a savepoint, so a failed statement never aborts the caller's transaction;
    the lease then becomes visible to other nodes only when the caller commits.

    The URL is the one the synchronous lock takes (`sqlite:///...`, `postgresql://`,
    `mysql+pymysql://`...); the asyncio lock maps it to its dialect's async driver
    (aiosqlite, psycopg's async connection, asyncmy; see `engine.ASYNC_DRIVERS`), and
    takes an explicit async URL (`sqlite+aiosqlite:///...`) as it is.

    Expired rows are deleted (`purge_expired`) by every instance built on a URL or an
    Engine about once a minute, at the end of an acquisition: fire claims are never
    released, only left to expire, and would otherwise stay in the table forever.

    The tables must exist: `install()` or `firefly-scheduling migrate` creates them.
    A missing table is reported as a `ConfigurationError` rather than created on the
    fly, because DDL inside a caller's transaction (MySQL commits it implicitly) or
    under an application role without CREATE rights would surprise.
    """

    backend_name = "database"
    ttl_honoured = True
    session_scoped = False
    cross_process = True
    supports_fencing = True
    renewable = True
    driver_errors = (SQLAlchemyError, OSError)

    def __init__(
        self,
        url_or_engine_or_connection: str | URL | Engine | Connection,
        *,
        table: str = DEFAULT_TABLE,
        max_connections: int | None = None,
    ) -> None:
        bind = url_or_engine_or_connection
        tables = LeaseTables.named(table)
        owns_engine = isinstance(bind, str | URL)
        if isinstance(bind, str | URL):
            # No transaction is ever left open on it (see `_run_on_driver`).
            bind = lock_engine(
                bind,
                share="lock",
                max_connections=max_connections,
                reset_on_return=False,
                autocommit=True,
                multi_statements=True,  # MySQL: a group of releases is one text
            )
        elif max_connections is not None:
            raise ConfigurationError(
                f"max_connections={max_connections!r} applies to a URL only: the "
                f"{type(bind).__name__} given brings its own pool, bounded by its own settings"
            )
        elif not isinstance(bind, Engine | Connection):
            raise ConfigurationError(
                f"DatabaseLeaseLock needs {_ACCEPTED}, got {type(bind).__name__}"
            )
        target, secrets = describe_url(bind.engine.url)
        super().__init__(target=target, secrets=secrets)
        self._sql = lease_sql_for(bind.dialect, tables)
        self._batches = lease_batches_for(bind.dialect, tables)
        #: `acquire_many` in a few statements (`dialect_batches`).
        self.batch_acquires = self._batches is not None
        self._tables = tables
        self._bind: Engine | Connection = bind
        self._owns_engine = owns_engine
        # A connection is not safe for concurrent use; an engine hands each caller its own.
        self._connection_mutex = threading.Lock()
        # Only where a purge is its own transaction, never inside a caller's.
        self._purges = isinstance(bind, Engine)
        #: Releases waiting for one another, sent together (`_release_together`), on
        #: the lock's own engine where the dialect answers a batch of them.
        self._releases: GroupedCalls[tuple[object, str], bool] | None = None
        if owns_engine and self._batches is not None and self._batches.answers_releases:
            most = self._batches.most_releases or RELEASES_PER_STATEMENT
            self._releases = GroupedCalls(self._release_together, most=most)
        self._next_purge = time.monotonic() + _purge_pause() / 2

    @property
    def tables(self) -> LeaseTables:
        """The lease table and the fence table, as SQLAlchemy `Table`s."""
        return self._tables

    def install(self) -> None:
        """Create both tables if they are absent; safe to run again and on several nodes."""
        for table in self._tables.all:
            try:
                self._run_on_sqlalchemy(partial(create_if_absent, table=table))
            except SQLAlchemyError as err:
                # Two nodes creating the same table at once: one loses on the catalog.
                if self._exists(table.name):
                    continue
                raise LockBackendError(
                    f"database lock backend {self._target} could not create table "
                    f"{table.name!r}: {self._describe(err)}"
                ) from err

    def purge_expired(self) -> int:
        """Delete every expired lease row; return how many went. One statement.

        Safe at any time: an expired lease is free already (the next acquirer would
        take it over), so deleting its row changes nothing but the table's size.
        """
        return self._run(self._purge)

    # -- BaseLock hooks -----------------------------------------------------------

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        won = self._attempt(partial(self._take, name=name, owner=owner, ttl_seconds=ttl_seconds))
        self._purge_when_due()
        return won is True

    def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        statement = self._sql.acquire_fenced
        if statement is not None:  # one statement: lease and fence commit together
            parameters = {
                "name": self._sql.key(name),
                "owner": owner,
                "ttl": self._sql.ttl(_lease_seconds(ttl_seconds)),
            }
            return self._attempt(
                partial(self._fenced_read, statement=statement, parameters=parameters)
            )
        if not self._acquire(name, owner, ttl_seconds):
            return None
        # The fence counts only while the lease is still ours, so the token order is the
        # holding order even though the two statements commit separately.
        try:
            token = self._attempt(partial(self._fence_held, name=name, owner=owner))
        except BaseException:
            self._release(name, owner)
            raise
        if token is None:  # the lease lapsed in between (a pause longer than the TTL), or a
            self._release(name, owner)  # lock wait on the counter timed out: a lost race
        return token

    def _acquire_many(
        self, requests: Sequence[tuple[str, str, float]], *, fenced: bool
    ) -> list[int | bool | BaseException | None]:
        """The batch in a few statements where the dialect has them (`dialect_batches`).

        Elsewhere one by one, and so is a batch that met another transaction on one of
        its rows (a lost race, `is_contention`): the race for one name must not lose
        the others. A batch that failed, or lost a race after its upsert, first gives
        back what it may have taken (one statement; PostgreSQL's single statement
        takes nothing when it fails); each answer is then the error.
        """
        batches = self._batches
        if batches is None or not requests:
            return super()._acquire_many(requests, fenced=fenced)
        most = batches.most_per_statement
        if most is not None and len(requests) > most:
            answers: list[int | bool | BaseException | None] = []
            for start in range(0, len(requests), most):
                part = requests[start : start + most]
                answers += self._acquire_many(part, fenced=fenced)
            return answers
        bound = [
            (self._sql.key(name), owner, self._sql.ttl(_lease_seconds(ttl)))
            for name, owner, ttl in requests
        ]
        try:
            batch = partial(self._won_many, batches=batches, requests=bound, fenced=fenced)
            won = self._attempt(batch)
        except ConfigurationError:
            raise
        except self.driver_errors as err:
            self._give_back(bound)
            return [err for _ in requests]
        if won is None:
            self._give_back(bound)
            return super()._acquire_many(requests, fenced=fenced)
        self._purge_when_due()
        return [won.get(key) if fenced else key in won for key, _, _ in bound]

    def _claim_many(self, claims: Sequence[tuple[str, float]]) -> list[bool | BaseException]:
        """Fire claims, leases with throwaway owner tokens, as one `acquire_many`.

        The resident host claims the fires of an instant together: one by one, 100
        claims kept the fires behind them waiting for 100 round trips (issue 12).
        """
        if self._batches is None:
            return super()._claim_many(claims)
        leases = [(name, new_owner_token(), seconds) for name, seconds in claims]
        answers = self._acquire_many(leases, fenced=False)
        return [answer if isinstance(answer, BaseException) else bool(answer) for answer in answers]

    def _release(self, name: str, owner: str) -> bool:
        if self._releases is not None:
            return self._releases.call((self._sql.key(name), owner))
        return self._release_alone(self._sql.key(name), owner)

    def _release_alone(self, key: object, owner: str) -> bool:
        parameters = {"name": key, "owner": owner}
        return self._run(partial(self._changed_one, self._sql.release, parameters))

    def _release_together(self, held: Sequence[tuple[object, str]]) -> list[bool]:
        """The releases that waited for one another: one round trip, an answer each.

        A resident node ends the fires of an instant together, and one statement per
        release kept the ones behind it waiting for a pooled connection (issue 12; on
        MariaDB one DELETE per release was 18 % of a winning node's CPU). Each lease
        is deleted only while it carries its own owner token, and each answer is read
        from what the server says it deleted, never inferred from another's: the rows
        the statement returned (PostgreSQL, SQLite), or the row count of the lease's
        own DELETE in a text of one per lease (MySQL, `LeaseBatches.releases_counted`).
        A group that fails is that error for each of its callers. A lone release is
        sent alone, in its own cheaper statement.
        """
        if len(held) == 1:
            return [self._release_alone(*held[0])]
        deleted = self._run(partial(self._deleted_many, held=held))
        return [pair in deleted for pair in held]

    def _deleted_many(
        self, tx: _Transaction, *, held: Sequence[tuple[object, str]]
    ) -> set[tuple[object, str]]:
        batches = self._batches
        assert batches is not None
        if not batches.releases_counted:
            reply = tx.run(*batches.released(held))
            return {(row[0], row[1]) for row in reply.fetchall()}
        # Grouped releases are the lock's own engine's, on the driver path (`__init__`).
        assert tx.run_each is not None
        return batches.deleted_by_counts(held, tx.run_each(*batches.released(held)))

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        parameters = {
            "name": self._sql.key(name),
            "owner": owner,
            "ttl": self._sql.ttl(_lease_seconds(ttl_seconds)),
        }
        return self._run(partial(self._changed_one, self._sql.renew, parameters))

    def _fence(self, name: str) -> int:
        return self._run(partial(self._next_fence, name=name))

    def _close(self) -> None:
        if self._owns_engine and isinstance(self._bind, Engine):
            self._bind.dispose()

    def _describe(self, err: BaseException) -> str:
        # The driver's own message, without SQLAlchemy's statement and parameter dump.
        if isinstance(err, DBAPIError) and err.orig is not None:
            return super()._describe(err.orig)
        return super()._describe(err)

    # -- statements -------------------------------------------------------------

    def _take(self, tx: _Transaction, name: str, owner: str, ttl_seconds: float) -> bool:
        key = self._sql.key(name)
        bound = self._sql.ttl(_lease_seconds(ttl_seconds))
        result = tx.run(self._sql.acquire, {"name": key, "owner": owner, "ttl": bound})
        won = self._sql.acquired(result.rowcount, tx.driver_connection)
        if won is None:  # the rowcount was ambiguous; the row is locked by us now
            holder = (tx.run(self._sql.holder, {"name": key})).fetchone()
            won = holder is not None and holder[0] == owner
        return won

    def _changed_one(
        self, statement: Statement, parameters: Mapping[str, object], tx: _Transaction
    ) -> bool:
        return (tx.run(statement, parameters)).rowcount == 1

    def _purge(self, tx: _Transaction) -> int:
        return (tx.run(self._sql.purge, {})).rowcount

    def _next_fence(self, tx: _Transaction, name: str) -> int:
        result = tx.run(self._sql.fence, {"name": self._sql.key(name)})
        return self._sql.fence_value(result)

    def _fenced_read(
        self, tx: _Transaction, *, statement: Statement, parameters: Mapping[str, object]
    ) -> int | None:
        return self._sql.fenced_value(tx.run(statement, parameters))

    def _won_many(
        self, tx: _Transaction, *, batches: LeaseBatches, requests: Sequence[Request], fenced: bool
    ) -> dict[object, int]:
        """The keys a batch won: each one's token (fenced) or 1."""
        reply = tx.run(*batches.acquire(requests, fenced=fenced))
        if batches.one_statement:
            return {row[0]: int(row[1]) if fenced else 1 for row in reply.fetchall()}
        owners = {key: owner for key, owner, _ in requests}
        if batches.names_in_reply:
            won = [row[0] for row in reply.fetchall()]
        else:
            holders = (tx.run(*batches.holders(list(owners)))).fetchall()
            won = [key for key, holder in holders if owners.get(key) == holder]
        if not fenced or not won:
            return dict.fromkeys(won, 1)
        held = [(key, owners[key]) for key in won]
        fenced_reply = tx.run(*batches.fence_held(held))
        if not batches.tokens_in_fence_reply:
            fenced_reply = tx.run(*batches.tokens(won))
        tokens = {key: int(value) for key, value in fenced_reply.fetchall()}
        lapsed = [(key, owner) for key, owner in held if key not in tokens]
        if lapsed:  # a lease that ran out between the statements: not ours to keep
            tx.run(*batches.release(lapsed))
        return tokens

    def _give_back(self, requests: Sequence[Request]) -> None:
        """Release what a failed batch may have taken: one statement, errors ignored."""
        batches = self._batches
        if batches is None or batches.one_statement:
            return
        held = [(key, owner) for key, owner, _ in requests]
        with suppress(*self.driver_errors):
            self._run(partial(self._run_bound, bound=batches.release(held)))

    def _run_bound(self, tx: _Transaction, *, bound: Bound) -> int:
        return (tx.run(*bound)).rowcount

    def _fence_held(self, tx: _Transaction, name: str, owner: str) -> int | None:
        statement = self._sql.fence_held
        if statement is None:  # pragma: no cover - every dialect has one form or the other
            raise NotImplementedError(f"the {self._sql.dialect_names[0]} dialect cannot fence")
        parameters = {"name": self._sql.key(name), "owner": owner}
        return self._sql.fenced_value(tx.run(statement, parameters))

    def _purge_when_due(self) -> None:
        """Purge expired leases about once a minute; a failure only delays the next one."""
        if not self._purges or time.monotonic() < self._next_purge:
            return
        self._next_purge = time.monotonic() + _purge_pause()
        try:
            purged = self.purge_expired()
        except SQLAlchemyError as err:
            logger.debug("database lock %s: purging expired leases failed: %s", self._target, err)
        else:
            logger.debug("database lock %s: purged %d expired leases", self._target, purged)

    # -- transactions -------------------------------------------------------------

    def _run(self, operation: _Operation[_T]) -> _T:
        """Run `operation` in a transaction of its own, or in a savepoint of the caller's."""
        if isinstance(self._bind, Engine) and self._owns_engine:
            return self._run_on_driver(self._bind, operation)
        return self._run_on_sqlalchemy(lambda connection: self._through(connection, operation))

    def _through(self, connection: Connection, operation: _Operation[_T]) -> _T:
        """`operation` through SQLAlchemy's execution layer, on `connection`'s transaction."""

        def run(statement: Statement, parameters: Mapping[str, object]) -> StatementResult:
            return connection.execute(statement.clause, parameters)

        driver_connection = connection.connection.driver_connection
        return operation(_Transaction(run, driver_connection))

    def _run_on_sqlalchemy(self, operation: _OnConnection[_T]) -> _T:
        if isinstance(self._bind, Engine):
            with self._bind.begin() as connection:
                return operation(connection)
        with self._connection_mutex:
            connection = self._bind
            transaction = (
                connection.begin_nested() if connection.in_transaction() else connection.begin()
            )
            with transaction:
                return operation(connection)

    def _run_on_driver(self, engine: Engine, operation: _Operation[_T]) -> _T:
        """Statements on a pooled driver connection of the lock's own engine, in autocommit.

        Every operation is one statement, atomic on its own, so the connection is in
        autocommit (`engine._autocommit`): no BEGIN and no COMMIT, one round trip per
        statement. (The fenced acquire without a one-statement form is two statements
        that need no transaction around them, see `dialects`.) Driver errors are wrapped
        as SQLAlchemy would (`DBAPIError`); a lost server connection is invalidated, and
        the pool's idle ones are dropped with it. No transaction is left open, so the
        pool need not reset the connection on its return. The asyncio flavour speaks
        to the async driver's own connection (`aio_driver`); one it was interrupted
        on (a cancellation) is discarded, as its protocol state is unknown.

        MySQL's group of releases is one text of several statements in a transaction
        (`dialect_batches`), read result by result (`run_each`) to the last, so none
        is left unread. A statement that fails stops the server's run of the text and
        is its last answer (PyMySQL and asyncmy raise it from that result's read, with
        nothing left to read): the transaction the text opened is rolled back here,
        and a connection that cannot be rolled back is discarded (`_roll_back`).
        """
        dialect = engine.dialect
        driver_error: type[DBAPIModule.Error] = dialect.loaded_dbapi.Error

        def wrapped(err: DBAPIModule.Error, *, disconnected: bool = False) -> BaseException:
            return DBAPIError.instance(
                None, None, err, driver_error, connection_invalidated=disconnected, dialect=dialect
            )

        try:
            pooled = engine.raw_connection()  # the pool does not wrap connect errors
        except driver_error as err:
            raise wrapped(err) from err
        cursor: Any = None
        try:
            cursor = pooled.cursor()

            def run(statement: Statement, parameters: Mapping[str, object]) -> StatementResult:
                cursor.execute(statement.driver_sql, statement.driver_parameters(parameters))
                return cursor  # type: ignore[no-any-return]

            def run_each(statement: Statement, parameters: Mapping[str, object]) -> list[int]:
                # PyMySQL: the first result is read by `execute`, each next one by
                # `nextset`, which raises the error of a statement that failed.
                cursor.execute(statement.driver_sql, statement.driver_parameters(parameters))
                counts = [int(cursor.rowcount)]
                while cursor.nextset():
                    counts.append(int(cursor.rowcount))
                return _answered(statement, counts, driver_error)

            return operation(_Transaction(run, pooled.driver_connection, run_each))
        except driver_error as err:
            disconnected = dialect.is_disconnect(err, pooled.dbapi_connection, cursor)
            if disconnected:
                _invalidate(pooled, err)
                _dispose_pool(engine)
            else:
                _roll_back(pooled, driver_error)
            raise wrapped(err, disconnected=disconnected) from err
        except BaseException as err:
            _after_interruption(pooled, driver_error, err)
            raise
        finally:
            if cursor is not None:
                with suppress(driver_error):
                    cursor.close()
            _check_in(pooled)  # back to the pool, with no transaction open

    def _attempt(self, operation: _Operation[_T]) -> _T | None:
        """Run an acquisition; a lost race is None, a missing table a ConfigurationError."""
        try:
            return self._run(operation)
        except DBAPIError as err:
            if self._sql.is_missing_table(err):
                raise ConfigurationError(
                    f"database lock backend {self._target}: table "
                    f"{self._tables.locks.name!r} or {self._tables.fences.name!r} does not "
                    f"exist; create them once with `firefly-scheduling migrate` or "
                    f"DatabaseLeaseLock.install()"
                ) from err
            if self._sql.is_contention(err):
                return None  # another transaction held or raced for the row
            raise

    def _exists(self, table: str) -> bool:
        def exists(connection: Connection) -> bool:
            return inspect(connection).has_table(table)

        try:
            found = self._run_on_sqlalchemy(exists)
        except SQLAlchemyError:
            return False
        return found


def _check_in(pooled: PoolProxiedConnection) -> None:
    """Hand `pooled` back; a full pool closes it instead, which waits on the async driver."""
    pooled.close()


def _invalidate(pooled: PoolProxiedConnection, err: BaseException) -> None:
    """Discard a pooled connection (closing it may wait on the async driver)."""
    pooled.invalidate(err)


def _dispose_pool(engine: Engine) -> None:
    """Drop the pool's idle connections too: the server that held them went away."""
    engine.pool.dispose()


def _after_interruption(
    pooled: PoolProxiedConnection, driver_error: type[DBAPIModule.Error], err: BaseException
) -> None:
    """Make `pooled` safe to reuse after an operation stopped by an exception of ours.

    A synchronous call ran to its end, so a rollback suffices; an awaited one may have
    been cancelled halfway through the driver's protocol, so its connection goes.
    """
    _roll_back(pooled, driver_error)


def _roll_back(pooled: PoolProxiedConnection, driver_error: type[DBAPIModule.Error]) -> None:
    """End any transaction on `pooled`; one that cannot end is not pooled again.

    A connection of the lock's own engine goes back to the pool without a reset, so
    a transaction left open on it (a group of MySQL releases that failed part way,
    `dialect_batches`) would hold its row locks for the next caller.
    """
    try:
        pooled.rollback()
    except driver_error as err:
        _invalidate(pooled, err)


def _answered(
    statement: Statement, counts: list[int], driver_error: type[DBAPIModule.Error]
) -> list[int]:
    """`counts`, a row count per statement of `statement`'s text; fewer is the driver's
    error (a server or proxy that ran part of the text without saying why)."""
    if len(counts) != statement.statements:
        raise driver_error(
            f"a text of {statement.statements} statements was answered {len(counts)} times"
        )
    return counts


def _purge_pause() -> float:
    # Jitter keeps a fleet's nodes from purging the same rows at the same moment.
    return PURGE_INTERVAL_SECONDS * random.uniform(1.0, 1.5)  # noqa: S311 - not a secret


def _lease_seconds(ttl_seconds: float) -> float:
    if ttl_seconds > MAX_LEASE_SECONDS:
        raise ConfigurationError(
            f"ttl_seconds={ttl_seconds!r} is longer than the database lock backend supports "
            f"({MAX_LEASE_SECONDS} seconds, about a century)"
        )
    return ttl_seconds
