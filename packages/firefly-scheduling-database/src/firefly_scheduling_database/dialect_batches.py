"""Several lease acquisitions in a few statements: the database lock's `acquire_many`.

The resident host claims the fires of an instant together, then takes the task
locks of the ones it won together (`FireRunner.claim_fires`). One statement per
name kept the fires behind them waiting: 100 claims were 100 round trips from one
thread (issue 12). Here a whole batch costs a fixed number of statements, with the
rules of the single acquisition (`dialects`): a name is taken only where it is free
or its lease expired, by the database's clock, and a fence counts only for a lease
won.

* PostgreSQL: ONE statement over arrays (`unnest`), a data-modifying CTE writing the
  fences of the names won; its reply lists them, with their tokens.
* MySQL/MariaDB: a multi-row upsert (whose row count cannot say which names won),
  then the holders of the names read back: a name is won where its row carries this
  request's owner token, unique per acquisition. Fenced, the counters of the names
  won are incremented while their leases are still ours (`fence_held`'s rule), then
  read back: only a holder increments a counter, so those values are our tokens.
* SQLite: a multi-row upsert whose `RETURNING` lists the names won (SQLite returns
  a row only where it inserted or updated one). Fenced, the counters of those names
  are incremented while their leases are still ours, in a second statement whose
  `RETURNING` gives the tokens. One writer holds the file at a time, and every
  statement took it (and, outside WAL, synced the file) on its own: one per name
  put the node's every fire behind the other nodes' writes (issue 12).

Rows are written in name order: two batches lock the rows they share in the same
order, so they wait for each other rather than deadlock. A batch that meets another
transaction anyway (a lock wait timeout, a deadlock) is retried one name at a time
by the lock, so the race for one name never loses the others.

Releases that wait for one another (`answers_releases`) go together too, each with
its own answer: PostgreSQL and SQLite delete them in ONE statement whose `RETURNING`
lists the leases it deleted. MySQL has no `DELETE ... RETURNING`, so its group is ONE
text of several statements, an owner-checked DELETE per lease, each answered by its
own affected-row count (`releases_counted`), inside one transaction: one DELETE per
release was 18 % of a winning MariaDB node's CPU (issue 12).

Statements are rendered once per lock, and for MySQL and SQLite once per batch
size (their placeholders are per row); a request is `(key, owner, bound ttl)`, as the lease
statements bind them (`LeaseSql.key`, `LeaseSql.ttl`). On MySQL a key is the hex digits
of the name's bytes, decoded by the server (`UNHEX`), and the names a reply lists come
back as `HEX(name)`: the same digits, so replies match requests by equality.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from sqlalchemy.engine import Dialect

from firefly_scheduling_database.dialects import SqliteLeaseSql, Statement
from firefly_scheduling_database.schema import LeaseTables

#: One acquisition of a batch: the bound name, the owner token and the bound TTL.
Request = tuple[object, str, object]
#: A statement and its parameters.
Bound = tuple[Statement, dict[str, object]]


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
    #: None for the lock's own bound (`RELEASES_PER_STATEMENT`).
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


class PostgresLeaseBatches(LeaseBatches):
    """One statement: the upsert over arrays, and the fences of the rows it returned.

    Releases too: one delete over arrays, returning the leases it deleted.
    """

    dialect_names = ("postgresql",)
    one_statement = True
    names_in_reply = True
    answers_releases = True
    _acquire_sql = (
        "INSERT INTO {locks} (name, locked_by, locked_until, locked_at) "
        "SELECT batch.name, batch.owner, db_now.instant + make_interval(secs => batch.ttl), "
        "db_now.instant FROM unnest(CAST(:names AS text[]), CAST(:owners AS text[]), "
        "CAST(:ttls AS float8[])) AS batch (name, owner, ttl), "
        "(SELECT clock_timestamp() AS instant) AS db_now ORDER BY batch.name "
        "ON CONFLICT (name) DO UPDATE SET locked_by = excluded.locked_by, "
        "locked_until = excluded.locked_until, locked_at = excluded.locked_at "
        "WHERE {locks}.locked_until <= excluded.locked_at "
        "RETURNING name"
    )
    _acquire_fenced_sql = (
        "WITH won AS (" + _acquire_sql + ") "  # noqa: S608 - constant text
        "INSERT INTO {fences} AS fence (name, value) SELECT won.name, 1 FROM won "
        "ORDER BY won.name ON CONFLICT (name) DO UPDATE SET value = fence.value + 1 "
        "RETURNING fence.name, fence.value"
    )

    _released_sql = (
        "DELETE FROM {locks} AS held USING unnest(CAST(:names AS text[]), "
        "CAST(:owners AS text[])) AS batch (name, owner) "
        "WHERE held.name = batch.name AND held.locked_by = batch.owner "
        "RETURNING held.name, held.locked_by"
    )

    def __init__(self, dialect: Dialect, tables: LeaseTables) -> None:
        super().__init__(dialect, tables)
        self._statements = {
            False: self._render(self._acquire_sql),
            True: self._render(self._acquire_fenced_sql),
        }
        self._released = self._render(self._released_sql)

    def acquire(self, requests: Sequence[Request], *, fenced: bool) -> Bound:
        parameters: dict[str, object] = {
            "names": [key for key, _, _ in requests],
            "owners": [owner for _, owner, _ in requests],
            "ttls": [ttl for _, _, ttl in requests],
        }
        return self._statements[fenced], parameters

    def released(self, held: Sequence[tuple[object, str]]) -> Bound:
        parameters: dict[str, object] = {
            "names": [key for key, _ in held],
            "owners": [owner for _, owner in held],
        }
        return self._released, parameters


class MySqlLeaseBatches(LeaseBatches):
    """A multi-row upsert, then reads (and fences) of what it won: 2 statements, 4 fenced.

    `VALUES(column)` is the row's would-be value, on MySQL and MariaDB alike (MySQL
    8.0.20 deprecates it for a row alias MariaDB lacks). As in the single upsert,
    `locked_until` is assigned last, so the other assignments still test the old lease.

    Releases: ONE text, `START TRANSACTION`, an owner-checked `DELETE` per lease in
    name order, `COMMIT`, sent in one round trip on the lock's own connections (which
    allow several statements, `engine.lock_engine`). Its values are hex digits and owner
    tokens only (checked, `Statement.driver_parameters`), so none of them can end a
    literal, whatever the session's sql_mode or character set. Each DELETE answers with its own
    affected-row count (1: deleted, 0: no longer this owner's), which MySQL's lack of
    `DELETE ... RETURNING` leaves as the only exact answer per lease. One transaction
    so that a text the server stops part way (a statement failed) deletes nothing:
    every caller of the group gets that error, as for a single release, and no lease
    is gone behind an error (the lock rolls the transaction back). It also makes the
    group one commit, not one per lease. Name order: two groups sharing rows lock them
    in the same order, so they wait for each other rather than deadlock.
    """

    dialect_names = ("mysql", "mariadb")
    names_in_reply = False
    answers_releases = True
    releases_counted = True
    #: A few hundred bytes of text per release (a name of up to 1,020 bytes goes as hex
    #: digits): a text stays within some 150 KB, far inside `max_allowed_packet`, and
    #: the renderings kept (one per group size met, `_sized`) stay few.
    most_releases = 64

    def acquire(self, requests: Sequence[Request], *, fenced: bool) -> Bound:
        ordered = sorted(requests, key=lambda request: _sort_key(request[0]))
        parameters: dict[str, object] = {}
        for index, (key, owner, ttl) in enumerate(ordered):
            parameters |= {f"name_{index}": key, f"owner_{index}": owner, f"ttl_{index}": ttl}
        return self._statement("upsert", len(ordered)), parameters

    def holders(self, keys: Sequence[object]) -> Bound:
        return self._statement("holders", len(keys)), _numbered("name", keys)

    def fence_held(self, held: Sequence[tuple[object, str]]) -> Bound:
        ordered = sorted(held, key=lambda pair: _sort_key(pair[0]))
        parameters = _numbered("name", [key for key, _ in ordered])
        parameters |= _numbered("owner", [owner for _, owner in ordered])
        return self._statement("fence_held", len(ordered)), parameters

    def tokens(self, keys: Sequence[object]) -> Bound:
        return self._statement("tokens", len(keys)), _numbered("name", keys)

    def release(self, held: Sequence[tuple[object, str]]) -> Bound:
        parameters = _numbered("name", [key for key, _ in held])
        parameters |= _numbered("owner", [owner for _, owner in held])
        return self._statement("release", len(held)), parameters

    def released(self, held: Sequence[tuple[object, str]]) -> Bound:
        ordered = _in_name_order(held)
        statements = len(ordered) + _RELEASED_AROUND
        statement = self._sized(_MYSQL_TEXTS, "released", len(ordered), statements=statements)
        return statement, _pairs(ordered)

    def deleted_by_counts(
        self, held: Sequence[tuple[object, str]], counts: Sequence[int]
    ) -> set[tuple[object, str]]:
        ordered = _in_name_order(held)  # the order `released` wrote them in
        if len(counts) != len(ordered) + _RELEASED_AROUND:
            raise ValueError(
                f"a text of {len(ordered)} releases has {len(ordered) + _RELEASED_AROUND} "
                f"statements, got {len(counts)} row counts"
            )
        deletes = counts[_RELEASED_BEFORE : _RELEASED_BEFORE + len(ordered)]
        return {pair for pair, count in zip(ordered, deletes, strict=True) if count == 1}

    def _statement(self, kind: str, size: int) -> Statement:
        return self._sized(_MYSQL_TEXTS, kind, size)


def _mysql_upsert(size: int) -> str:
    rows = ", ".join(
        f"(UNHEX(:name_{i}), :owner_{i}, UTC_TIMESTAMP(6) + INTERVAL :ttl_{i} MICROSECOND, "
        "UTC_TIMESTAMP(6))"
        for i in range(size)
    )
    return (
        "INSERT INTO {locks} (name, locked_by, locked_until, locked_at) VALUES "  # noqa: S608
        + rows
        + " ON DUPLICATE KEY UPDATE "
        "locked_by = IF(locked_until <= UTC_TIMESTAMP(6), VALUES(locked_by), locked_by), "
        "locked_at = IF(locked_until <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), locked_at), "
        "locked_until = IF(locked_until <= UTC_TIMESTAMP(6), VALUES(locked_until), locked_until)"
    )


def _mysql_holders(size: int) -> str:
    names = _decoded_placeholders("name", size)
    return f"SELECT HEX(name), locked_by FROM {{locks}} WHERE name IN ({names})"  # noqa: S608


def _mysql_fence_held(size: int) -> str:
    return (
        "INSERT INTO {fences} (name, value) SELECT held.name, 1 FROM {locks} AS held "  # noqa: S608
        f"WHERE held.name IN ({_decoded_placeholders('name', size)}) "
        f"AND held.locked_by IN ({_placeholders('owner', size)}) "
        "AND held.locked_until > UTC_TIMESTAMP(6) ORDER BY held.name "
        "ON DUPLICATE KEY UPDATE value = {fences}.value + 1"
    )


def _mysql_tokens(size: int) -> str:
    names = _decoded_placeholders("name", size)
    return f"SELECT HEX(name), value FROM {{fences}} WHERE name IN ({names})"  # noqa: S608


def _mysql_release(size: int) -> str:
    return (
        "DELETE FROM {locks} WHERE name IN "  # noqa: S608 - placeholders
        f"({_decoded_placeholders('name', size)}) AND locked_by IN ({_placeholders('owner', size)})"
    )


#: Statements of a release text before its DELETEs (START TRANSACTION), and around them.
_RELEASED_BEFORE = 1
_RELEASED_AROUND = 2


def _mysql_released(size: int) -> str:
    """`size` owner-checked DELETEs, one a lease, in one transaction: one text."""
    deletes = (
        f"DELETE FROM {{locks}} WHERE name = UNHEX(:name_{i}) AND locked_by = :owner_{i}"  # noqa: S608
        for i in range(size)
    )
    return "; ".join(["START TRANSACTION", *deletes, "COMMIT"])


_MYSQL_TEXTS: dict[str, Callable[[int], str]] = {
    "release": _mysql_release,
    "released": _mysql_released,
    "upsert": _mysql_upsert,
    "holders": _mysql_holders,
    "fence_held": _mysql_fence_held,
    "tokens": _mysql_tokens,
}


class SqliteLeaseBatches(LeaseBatches):
    """A multi-row upsert answering the names won: 1 statement, 2 fenced.

    Releases too: one delete, returning the leases it deleted. A pair of a batch is
    matched as a row value, `(name, locked_by) IN (VALUES ...)`, under `name IN (...)`
    so that SQLite searches the primary key rather than scanning the table. Instants
    are `SqliteLeaseSql`'s, from SQLite's `'now'`, the same for every row of a statement.
    """

    dialect_names = ("sqlite",)
    names_in_reply = True
    tokens_in_fence_reply = True
    answers_releases = True
    #: 3 placeholders a row: far inside SQLite's 32,766 (3.32 and newer).
    most_per_statement = 1000

    def acquire(self, requests: Sequence[Request], *, fenced: bool) -> Bound:
        ordered = sorted(requests, key=lambda request: _sort_key(request[0]))
        parameters: dict[str, object] = {}
        for index, (key, owner, ttl) in enumerate(ordered):
            parameters |= {f"name_{index}": key, f"owner_{index}": owner, f"ttl_{index}": ttl}
        return self._sized(_SQLITE_TEXTS, "upsert", len(ordered)), parameters

    def fence_held(self, held: Sequence[tuple[object, str]]) -> Bound:
        ordered = sorted(held, key=lambda pair: _sort_key(pair[0]))
        return self._sized(_SQLITE_TEXTS, "fence_held", len(ordered)), _pairs(ordered)

    def release(self, held: Sequence[tuple[object, str]]) -> Bound:
        return self.released(held)

    def released(self, held: Sequence[tuple[object, str]]) -> Bound:
        return self._sized(_SQLITE_TEXTS, "released", len(held)), _pairs(held)


def _sqlite_upsert(size: int) -> str:
    now = SqliteLeaseSql.fragments["now"]
    rows = ", ".join(
        f"(:name_{i}, :owner_{i}, {SqliteLeaseSql.fragments['later'].replace(':ttl', f':ttl_{i}')}"
        f", {now})"
        for i in range(size)
    )
    return (
        "INSERT INTO {locks} (name, locked_by, locked_until, locked_at) VALUES "  # noqa: S608
        + rows
        + " ON CONFLICT (name) DO UPDATE SET locked_by = excluded.locked_by, "
        "locked_until = excluded.locked_until, locked_at = excluded.locked_at "
        "WHERE {locks}.locked_until <= excluded.locked_at RETURNING name"
    )


def _sqlite_fence_held(size: int) -> str:
    # The WHERE clause also tells SQLite's parser that ON CONFLICT is not a join's ON.
    return (
        "INSERT INTO {fences} (name, value) SELECT held.name, 1 FROM {locks} AS held "  # noqa: S608
        f"WHERE {_sqlite_pair_match('held', size)} "
        f"AND held.locked_until > {SqliteLeaseSql.fragments['now']} ORDER BY held.name "
        "ON CONFLICT (name) DO UPDATE SET value = {fences}.value + 1 RETURNING name, value"
    )


def _sqlite_released(size: int) -> str:
    return (
        "DELETE FROM {locks} AS held WHERE "  # noqa: S608 - placeholders
        f"{_sqlite_pair_match('held', size)} RETURNING name, locked_by"
    )


def _sqlite_pair_match(table: str, size: int) -> str:
    """`table`'s rows whose `(name, locked_by)` is one of the pairs `:name_i, :owner_i`."""
    pairs = ", ".join(f"(:name_{i}, :owner_{i})" for i in range(size))
    return (
        f"{table}.name IN ({_placeholders('name', size)}) "
        f"AND ({table}.name, {table}.locked_by) IN (VALUES {pairs})"
    )


_SQLITE_TEXTS: dict[str, Callable[[int], str]] = {
    "upsert": _sqlite_upsert,
    "fence_held": _sqlite_fence_held,
    "released": _sqlite_released,
}


def lease_batches_for(dialect: Dialect, tables: LeaseTables) -> LeaseBatches | None:
    """The batch statements of `dialect`, or None where it acquires one by one."""
    for batches in (PostgresLeaseBatches, MySqlLeaseBatches, SqliteLeaseBatches):
        if dialect.name in batches.dialect_names:
            return batches(dialect, tables)
    return None


def _placeholders(prefix: str, size: int) -> str:
    return ", ".join(f":{prefix}_{i}" for i in range(size))


def _decoded_placeholders(prefix: str, size: int) -> str:
    """MySQL: `_placeholders` of names bound as hex digits, decoded by the server."""
    return ", ".join(f"UNHEX(:{prefix}_{i})" for i in range(size))


def _numbered(prefix: str, values: Sequence[object]) -> dict[str, object]:
    return {f"{prefix}_{i}": value for i, value in enumerate(values)}


def _pairs(held: Sequence[tuple[object, str]]) -> dict[str, object]:
    return _numbered("name", [key for key, _ in held]) | _numbered(
        "owner", [owner for _, owner in held]
    )


def _in_name_order(held: Sequence[tuple[object, str]]) -> list[tuple[object, str]]:
    return sorted(held, key=lambda pair: _sort_key(pair[0]))


def _sort_key(key: object) -> bytes:
    # MySQL's keys are the hex digits of the names' bytes, which sort as the bytes do.
    return str(key).encode("utf-8")
