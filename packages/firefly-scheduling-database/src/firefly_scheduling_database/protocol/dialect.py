"""What every dialect's lease statements say, and what a lock reads back from them.

`LeaseSql` holds the statements of single operations, `LeaseBatches` those of
several at once; each dialect's module (`postgres`, `mysql`, `sqlite`) fills them in.

Every instant is taken from the database's clock inside the statement itself, so
the clocks of the nodes never matter, and each single operation is ONE statement:

* acquire: an upsert that inserts a free name or takes over an expired lease only;
  the rowcount says whether this owner won;
* release: a delete of the row only while it carries this acquisition's token;
* renew: an update of this owner's still-valid lease;
* fence: an increment-and-return of the name's counter;
* fenced acquire: the lease and the fence in ONE statement where the dialect can
  write two tables in one (PostgreSQL: a data-modifying CTE); elsewhere the acquire,
  then a fence that increments only while the lease is still this owner's
  (`fence_held`), which needs no transaction around the two to order tokens as
  holdings are ordered;
* purge: a delete of expired leases (claims are never released, only expire);
* the waiters' queue (`locks.ticket_queue_async`): a ticket is a row of the queue
  table, joined at the database's `{now}` and expiring at `{later}`; the first is
  the live row joined earliest (the ticket breaks a tie); leaving deletes the
  ticket's row and the name's lapsed ones.

A batch (the task locks of the fires a resident node won together, the releases
that wait for one another) costs a fixed number of statements, with the rules of
the single operation: a name is taken only where it is free or its lease expired, by
the database's clock, and a fence counts only for a lease won. Rows are written in
name order: two batches lock the rows they share in the same order, so they wait for
each other rather than deadlock. A batch that meets another transaction anyway (a
lock wait timeout, a deadlock) is retried one name at a time by the lock, so the
race for one name never loses the others.

Batch statements are rendered once per lock, and for MySQL and SQLite once per
batch size (their placeholders are per row); a request is `(key, owner, bound
ttl)`, as the lease statements bind them (`LeaseSql.key`, `LeaseSql.ttl`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError

from firefly_scheduling_database.protocol.statement import Statement, StatementResult
from firefly_scheduling_database.schema import LeaseTables

#: One acquisition of a batch: the bound name, the owner token and the bound TTL.
Request = tuple[object, str, object]
#: A statement and its parameters.
Bound = tuple[Statement, dict[str, object]]


class LeaseSql(ABC):
    """The statements of one dialect, bound to one pair of tables."""

    dialect_names: ClassVar[tuple[str, ...]]
    acquire_sql: ClassVar[str]
    release_sql: ClassVar[str] = "DELETE FROM {locks} WHERE name = {name} AND locked_by = :owner"
    renew_sql: ClassVar[str]
    fence_sql: ClassVar[str] = (
        "INSERT INTO {fences} (name, value) VALUES ({name}, 1) "
        "ON CONFLICT (name) DO UPDATE SET value = {fences}.value + 1 RETURNING value"
    )
    holder_sql: ClassVar[str] = "SELECT locked_by FROM {locks} WHERE name = {name}"
    #: Lease and fence in one statement returning the token, or None where impossible.
    acquire_fenced_sql: ClassVar[str | None] = None
    #: Increment the counter only while `:owner` holds an unexpired lease on `:name`;
    #: for the dialects without `acquire_fenced_sql`.
    fence_held_sql: ClassVar[str | None] = None
    purge_sql: ClassVar[str]
    queue_join_sql: ClassVar[str] = (
        "INSERT INTO {queue} (name, ticket, joined_at, expires_at) "
        "VALUES ({name}, :ticket, {now}, {later})"
    )
    queue_keep_sql: ClassVar[str] = (
        "UPDATE {queue} SET expires_at = {later} "
        "WHERE name = {name} AND ticket = :ticket AND expires_at > {now}"
    )
    queue_first_sql: ClassVar[str] = (
        "SELECT ticket FROM {queue} WHERE name = {name} AND expires_at > {now} "
        "ORDER BY joined_at, ticket LIMIT 1"
    )
    queue_leave_sql: ClassVar[str] = (
        "DELETE FROM {queue} WHERE name = {name} AND (ticket = :ticket OR expires_at <= {now})"
    )
    #: How a statement reads the bound name (`{name}`): the parameter itself, or the
    #: server's decoding of it (MySQL, see `key`).
    bound_name: ClassVar[str] = ":name"
    #: Further `{placeholders}` the dialect's statements use; every dialect has `now`
    #: (the database's clock) and `later` (`:ttl` after it).
    fragments: ClassVar[dict[str, str]] = {}

    def __init__(self, dialect: Dialect, tables: LeaseTables) -> None:
        preparer = dialect.identifier_preparer
        names = {
            "locks": preparer.format_table(tables.locks),
            "fences": preparer.format_table(tables.fences),
            "queue": preparer.format_table(tables.queue),
            "name": self.bound_name,
            **self.fragments,
        }
        self.acquire = Statement.render(self.acquire_sql.format(**names), dialect)
        self.release = Statement.render(self.release_sql.format(**names), dialect)
        self.renew = Statement.render(self.renew_sql.format(**names), dialect)
        self.fence = Statement.render(self.fence_sql.format(**names), dialect)
        self.holder = Statement.render(self.holder_sql.format(**names), dialect)
        self.acquire_fenced = (
            None
            if self.acquire_fenced_sql is None
            else Statement.render(self.acquire_fenced_sql.format(**names), dialect)
        )
        self.fence_held = (
            None
            if self.fence_held_sql is None
            else Statement.render(self.fence_held_sql.format(**names), dialect)
        )
        self.purge = Statement.render(self.purge_sql.format(**names), dialect)
        self.queue_join = Statement.render(self.queue_join_sql.format(**names), dialect)
        self.queue_keep = Statement.render(self.queue_keep_sql.format(**names), dialect)
        self.queue_first = Statement.render(self.queue_first_sql.format(**names), dialect)
        self.queue_leave = Statement.render(self.queue_leave_sql.format(**names), dialect)

    def key(self, name: str) -> str:
        """The value bound for the `name` column (`{name}` in a statement)."""
        return name

    @abstractmethod
    def ttl(self, ttl_seconds: float) -> Any:
        """The value bound for `:ttl`, in the unit the dialect's date arithmetic wants."""

    def acquired(self, rowcount: int, driver_connection: object) -> bool | None:
        """Whether the acquire upsert won, or None when its rowcount cannot tell."""
        return rowcount == 1

    def fence_value(self, result: StatementResult) -> int:
        """The counter value the fence statement produced."""
        return int(result.fetchone()[0])

    def fenced_value(self, result: StatementResult) -> int | None:
        """The token a conditional fence (`acquire_fenced`, `fence_held`) produced, if any."""
        row = result.fetchone()
        return None if row is None else int(row[0])

    @abstractmethod
    def is_contention(self, err: DBAPIError) -> bool:
        """Whether `err` means another transaction held or raced for the row (a lost race)."""

    @abstractmethod
    def is_missing_table(self, err: DBAPIError) -> bool:
        """Whether `err` means the lease tables have not been created."""


class LeaseBatches(ABC):
    """The batch statements of one dialect, bound to one pair of tables."""

    dialect_names: ClassVar[tuple[str, ...]]
    #: Whether `acquire` is the whole batch, fences included, in ONE statement: its reply
    #: lists the names won with their tokens, and when it fails it took nothing.
    one_statement: ClassVar[bool] = False
    #: Whether `acquire`'s reply lists the names won; else `holders` follows it.
    names_in_reply: ClassVar[bool]
    #: Whether `fence_held`'s reply lists `(name, token)` of each counter it incremented;
    #: else `tokens` follows it.
    tokens_in_fence_reply: ClassVar[bool] = False
    #: Whether `released` deletes a batch of leases and answers for each, so that
    #: several releases can share a round trip, each with its own answer.
    answers_releases: ClassVar[bool] = False
    #: Whether `released`'s answer is one row count per statement of a multi-statement
    #: text (read with `deleted_by_counts`) rather than rows listing what it deleted.
    releases_counted: ClassVar[bool] = False
    #: Most releases `released` takes at once (a longer group waits for the next), or
    #: None for the lock's own bound (`releases_async.RELEASES_PER_STATEMENT`).
    most_releases: ClassVar[int | None] = None
    #: Most requests in one statement (the lock sends a longer batch in parts), or None.
    most_per_statement: ClassVar[int | None] = None

    def __init__(self, dialect: Dialect, tables: LeaseTables) -> None:
        preparer = dialect.identifier_preparer
        self._dialect = dialect
        self._tables = {
            "locks": preparer.format_table(tables.locks),
            "fences": preparer.format_table(tables.fences),
        }
        #: Rendered statements by (kind, batch size), where placeholders are per row: a
        #: node's batches take few sizes.
        self._rendered: dict[tuple[str, int], Statement] = {}

    @abstractmethod
    def acquire(self, requests: Sequence[Request], *, fenced: bool) -> Bound:
        """Take each free or expired lease of `requests`, in name order."""

    def holders(self, keys: Sequence[object]) -> Bound:
        """`(name, locked_by)` of each of `keys` that has a row."""
        raise NotImplementedError(f"the {self.dialect_names[0]} batch answers in its reply")

    def fence_held(self, held: Sequence[tuple[object, str]]) -> Bound:
        """Increment the counter of each `(key, owner)` whose lease is still that owner's."""
        raise NotImplementedError(f"the {self.dialect_names[0]} batch answers in its reply")

    def tokens(self, keys: Sequence[object]) -> Bound:
        """`(name, value)` of the counters of `keys`."""
        raise NotImplementedError(f"the {self.dialect_names[0]} batch answers in its reply")

    def release(self, held: Sequence[tuple[object, str]]) -> Bound:
        """Delete the lease of each `(key, owner)` while it carries that owner's token."""
        raise NotImplementedError(f"the {self.dialect_names[0]} batch takes nothing on failure")

    def released(self, held: Sequence[tuple[object, str]]) -> Bound:
        """`release`, answering for each lease: its reply lists `(key, owner)` of each
        lease it deleted, or, where `releases_counted`, `deleted_by_counts` reads it."""
        raise NotImplementedError(f"the {self.dialect_names[0]} batch cannot answer releases")

    def deleted_by_counts(
        self, held: Sequence[tuple[object, str]], counts: Sequence[int]
    ) -> set[tuple[object, str]]:
        """The pairs of `held` that `released(held)` deleted, from the row count of
        each statement of its text (`releases_counted`)."""
        raise NotImplementedError(f"the {self.dialect_names[0]} batch answers in its rows")

    def _render(self, sql: str, *, statements: int = 1) -> Statement:
        return Statement.render(sql.format(**self._tables), self._dialect, statements=statements)

    def _sized(
        self,
        texts: Mapping[str, Callable[[int], str]],
        kind: str,
        size: int,
        *,
        statements: int = 1,
    ) -> Statement:
        """The statement `texts[kind]` writes for `size` rows, rendered once per size."""
        statement = self._rendered.get((kind, size))
        if statement is None:
            statement = self._render(texts[kind](size), statements=statements)
            self._rendered[(kind, size)] = statement
        return statement


def placeholders(prefix: str, size: int) -> str:
    """`:prefix_0, :prefix_1, ...`: a placeholder per row."""
    return ", ".join(f":{prefix}_{i}" for i in range(size))


def decoded_placeholders(prefix: str, size: int) -> str:
    """MySQL: `placeholders` of names bound as hex digits, decoded by the server."""
    return ", ".join(f"UNHEX(:{prefix}_{i})" for i in range(size))


def numbered(prefix: str, values: Sequence[object]) -> dict[str, object]:
    """`values` as the parameters `placeholders` names."""
    return {f"{prefix}_{i}": value for i, value in enumerate(values)}


def pairs(held: Sequence[tuple[object, str]]) -> dict[str, object]:
    """`(key, owner)` pairs as `name_i` and `owner_i` parameters."""
    return numbered("name", [key for key, _ in held]) | numbered(
        "owner", [owner for _, owner in held]
    )


def in_name_order(held: Sequence[tuple[object, str]]) -> list[tuple[object, str]]:
    """`held` in the order its rows are written."""
    return sorted(held, key=lambda pair: sort_key(pair[0]))


def sort_key(key: object) -> bytes:
    """The order rows are written in: the keys' bytes."""
    # MySQL's keys are the hex digits of the names' bytes, which sort as the bytes do.
    return str(key).encode("utf-8")
