# Generated from lock_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`DatabaseLeaseLock`: a lease per name, kept as a row of an ordinary SQL table.

Written once, for asyncio, in `lock_async.py` on SQLAlchemy's asyncio extension;
the synchronous `DatabaseLeaseLock` in `lock.py` is generated from it by
`tools/async_to_sync.py`. Both send the same statements (`protocol`) to the same
tables (`schema`) and build their engines from the same URLs (`url`, `engine`), so a
fleet can mix sync and async nodes: the two exclude each other on the same name.
Where the statements run, and in which transaction, is `transactions_async`'s;
creating the tables and purging expired leases is `table_upkeep_async`'s, and
sending the releases, alone or together, `releases_async`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TypeVar

from sqlalchemy import URL, Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.holding import new_owner_token
from firefly_scheduling.locks.ticket_queue import TicketQueue
from firefly_scheduling_database import operations
from firefly_scheduling_database.engine import lock_engine
from firefly_scheduling_database.protocol import lease_batches_for, lease_sql_for
from firefly_scheduling_database.releases import LeaseReleases
from firefly_scheduling_database.schema import DEFAULT_TABLE, LeaseTables
from firefly_scheduling_database.table_upkeep import LeaseTableUpkeep
from firefly_scheduling_database.transactions import (
    Operation,
    Transactions,
)
from firefly_scheduling_database.url import describe_url

_T = TypeVar("_T")

_ACCEPTED = "a URL, an Engine or a Connection"

#: Longest lease accepted: date types end at year 9999, and a century is "forever".
MAX_LEASE_SECONDS = 100 * 366 * 86_400


class DatabaseLeaseLock(TicketQueue):
    """A lease lock in a table of SQLite, PostgreSQL or MySQL/MariaDB (SQLAlchemy 2).

    Each held name is a row carrying the acquisition's owner token and a
    `locked_until` instant from the DATABASE's clock; an expired row is taken over by
    the next acquirer, so a crashed holder frees its names after the TTL. Acquire,
    release and renew are one statement each (see `protocol`).

    Give it a URL (the lock builds and owns a pooled engine with bounded timeouts and a
    bounded pool, its share of `max_connections` (the argument or the URL's query
    parameter, 4 by default: 2 for the lock; see `locks.connection_budget`), in
    autocommit, and sends its statements straight to the pooled driver connection: one
    round trip per operation, see `transactions_async`), an `Engine`
    (each operation is its own short transaction on a pooled connection, through
    SQLAlchemy's execution layer, so the application's event listeners see it) or a
    connection (`Connection`). On a connection already inside a transaction every
    operation runs in a savepoint, so a failed statement never aborts the caller's transaction;
    the lease then becomes visible to other nodes only when the caller commits.

    The URL is the one the synchronous lock takes (`sqlite:///...`, `postgresql://`,
    `mysql+pymysql://`...); the asyncio lock maps it to its dialect's async driver
    (aiosqlite, psycopg's async connection, asyncmy; see `url.ASYNC_DRIVERS`), and
    takes an explicit async URL (`sqlite+aiosqlite:///...`) as it is.

    Expired rows are deleted (`purge_expired`) by every instance built on a URL or an
    Engine about once a minute, at the end of an acquisition (`table_upkeep_async`).

    Waiting acquisitions poll with the core's backoff, in a queue of expiring tickets
    per name (the `<table>_queue` table, `locks.ticket_queue_async`), so waiters of
    every node are served in arrival order.

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
            # No transaction is ever left open on it (see `transactions_async`).
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
        #: `acquire_many` in a few statements (`protocol`).
        self.batch_acquires = self._batches is not None
        self._tables = tables
        self._bind: Engine | Connection = bind
        self._owns_engine = owns_engine
        self._transactions = Transactions(bind, owns_engine=owns_engine)
        # Purges only where a purge is its own transaction, never inside a caller's.
        self._upkeep = LeaseTableUpkeep(
            self._transactions,
            self._sql,
            tables,
            target=target,
            describe=self._describe,
            purges=isinstance(bind, Engine),
        )
        self._releases = LeaseReleases(
            self._transactions,
            self._sql,
            self._batches,
            own_engine=owns_engine,
            driver_errors=self.driver_errors,
        )

    @property
    def tables(self) -> LeaseTables:
        """The lease table and the fence table, as SQLAlchemy `Table`s."""
        return self._tables

    def install(self) -> None:
        """Create the tables if they are absent; safe to run again and on several nodes."""
        self._upkeep.install()

    def purge_expired(self) -> int:
        """Delete every expired lease row; return how many went. One statement.

        Safe at any time: an expired lease is free already (the next acquirer would
        take it over), so deleting its row changes nothing but the table's size.
        """
        return self._upkeep.purge()

    # -- BaseLock hooks -----------------------------------------------------------

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        return self._take(name, owner, ttl_seconds)

    def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        return self._take_fenced(name, owner, ttl_seconds)

    def _take(self, name: str, owner: str, ttl_seconds: float) -> bool:
        ttl = self._sql.ttl(_lease_seconds(ttl_seconds))
        won = self._attempt(
            partial(operations.take, sql=self._sql, name=name, owner=owner, ttl=ttl)
        )
        self._upkeep.purge_when_due()
        return won is True

    def _take_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        statement = self._sql.acquire_fenced
        if statement is not None:  # one statement: lease and fence commit together
            parameters = {
                "name": self._sql.key(name),
                "owner": owner,
                "ttl": self._sql.ttl(_lease_seconds(ttl_seconds)),
            }
            return self._attempt(
                partial(
                    operations.fenced_read,
                    sql=self._sql,
                    statement=statement,
                    parameters=parameters,
                )
            )
        if not self._take(name, owner, ttl_seconds):
            return None
        # The fence counts only while the lease is still ours, so the token order is the
        # holding order even though the two statements commit separately.
        try:
            token = self._attempt(
                partial(operations.fence_held, sql=self._sql, name=name, owner=owner)
            )
        except BaseException:
            self._release(name, owner)
            raise
        if token is None:  # the lease lapsed in between (a pause longer than the TTL), or a
            self._release(name, owner)  # lock wait on the counter timed out: a lost race
        return token

    def _acquire_many(
        self, requests: Sequence[tuple[str, str, float]], *, fenced: bool
    ) -> list[int | bool | BaseException | None]:
        """The batch in a few statements where the dialect has them (`protocol`).

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
            batch = partial(operations.won_many, batches=batches, requests=bound, fenced=fenced)
            won = self._attempt(batch)
        except ConfigurationError:
            raise
        except self.driver_errors as err:
            self._releases.give_back(bound)
            return [err for _ in requests]
        if won is None:
            self._releases.give_back(bound)
            return super()._acquire_many(requests, fenced=fenced)
        self._upkeep.purge_when_due()
        return [won.get(key) if fenced else key in won for key, _, _ in bound]

    def _claim_many(self, claims: Sequence[tuple[str, float]]) -> list[bool | BaseException]:
        """Fire claims, leases with throwaway owner tokens, as one `acquire_many`.

        The resident host claims the fires of an instant together: one by one, 100
        claims kept the fires behind them waiting for 100 round trips.
        """
        if self._batches is None:
            return super()._claim_many(claims)
        leases = [(name, new_owner_token(), seconds) for name, seconds in claims]
        answers = self._acquire_many(leases, fenced=False)
        return [answer if isinstance(answer, BaseException) else bool(answer) for answer in answers]

    def _release(self, name: str, owner: str) -> bool:
        return self._releases.release(name, owner)

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        parameters = {
            "name": self._sql.key(name),
            "owner": owner,
            "ttl": self._sql.ttl(_lease_seconds(ttl_seconds)),
        }
        return self._transactions.run(
            partial(operations.changed_one, statement=self._sql.renew, parameters=parameters)
        )

    def _fence(self, name: str) -> int:
        return self._transactions.run(partial(operations.next_fence, sql=self._sql, name=name))

    # -- the waiters' queue (`<table>_queue`) --------------------------------------------

    def _take_when_first(
        self, name: str, owner: str, ttl_seconds: float, *, fenced: bool
    ) -> int | bool | None:
        if fenced:
            return self._take_fenced(name, owner, ttl_seconds)
        return self._take(name, owner, ttl_seconds)

    def _join_queue(self, name: str, ticket: str, seconds: float) -> object:
        """The row of `ticket`; a lost race on the insert only makes the next attempt,
        which finds no row to keep, queue it again."""
        ttl = self._sql.ttl(seconds)
        self._attempt(
            partial(operations.queue_join, sql=self._sql, name=name, ticket=ticket, ttl=ttl)
        )
        return ticket

    def _keep_place(self, name: str, spot: object, seconds: float) -> bool:
        parameters = {"name": self._sql.key(name), "ticket": spot, "ttl": self._sql.ttl(seconds)}
        kept = self._attempt(
            partial(
                operations.changed_one,
                statement=self._sql.queue_keep,
                parameters=parameters,
            )
        )
        return kept is not False  # a lost race (None) is no proof that it lapsed

    def _first_in_queue(self, name: str, spot: object | None) -> bool:
        first = self._attempt(partial(operations.queue_first, sql=self._sql, name=name))
        if first is None:
            return False  # a lost race: try again after the pause
        return first == ([] if spot is None else [spot])

    def _leave_queue(self, name: str, spot: object) -> None:
        parameters = {"name": self._sql.key(name), "ticket": spot}
        self._transactions.run(
            partial(
                operations.changed_one,
                statement=self._sql.queue_leave,
                parameters=parameters,
            )
        )

    def _close(self) -> None:
        if self._owns_engine and isinstance(self._bind, Engine):
            self._bind.dispose()

    def _describe(self, err: BaseException) -> str:
        # The driver's own message, without SQLAlchemy's statement and parameter dump.
        if isinstance(err, DBAPIError) and err.orig is not None:
            return super()._describe(err.orig)
        return super()._describe(err)

    # -- transactions -------------------------------------------------------------

    def _attempt(self, operation: Operation[_T]) -> _T | None:
        """Run an acquisition; a lost race is None, a missing table a ConfigurationError."""
        try:
            return self._transactions.run(operation)
        except DBAPIError as err:
            if self._sql.is_missing_table(err):
                raise ConfigurationError(
                    f"database lock backend {self._target}: table "
                    f"{self._tables.locks.name!r}, {self._tables.fences.name!r} or "
                    f"{self._tables.queue.name!r} does not exist; create them once with "
                    f"`firefly-scheduling migrate` or DatabaseLeaseLock.install()"
                ) from err
            if self._sql.is_contention(err):
                return None  # another transaction held or raced for the row
            raise


def _lease_seconds(ttl_seconds: float) -> float:
    if ttl_seconds > MAX_LEASE_SECONDS:
        raise ConfigurationError(
            f"ttl_seconds={ttl_seconds!r} is longer than the database lock backend supports "
            f"({MAX_LEASE_SECONDS} seconds, about a century)"
        )
    return ttl_seconds
