# Generated from operations_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""The database lock's operations: the statements each one sends on a `Transaction`.

Each function is one lock operation, given the transaction it runs on (see
`transactions_async`) and the statements of the lock's dialect (`protocol`); it
reads the answer the way the dialect gives it. The lock decides when to run which,
and what a lost race or a failure means.

Written once, for asyncio, in `operations_async.py`; `operations.py` is generated
from it by `tools/async_to_sync.py`, as the lock is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from firefly_scheduling_database.protocol.dialect import Bound, LeaseBatches, LeaseSql, Request
from firefly_scheduling_database.protocol.statement import Statement
from firefly_scheduling_database.transactions import Transaction


def take(tx: Transaction, *, sql: LeaseSql, name: str, owner: str, ttl: object) -> bool:
    """Acquire `name` for `owner` (`ttl` bound by `sql.ttl`); whether this owner won."""
    key = sql.key(name)
    result = tx.run(sql.acquire, {"name": key, "owner": owner, "ttl": ttl})
    won = sql.acquired(result.rowcount, tx.driver_connection)
    if won is None:  # the rowcount was ambiguous; the row is locked by us now
        holder = (tx.run(sql.holder, {"name": key})).fetchone()
        won = holder is not None and holder[0] == owner
    return won


def changed_one(tx: Transaction, *, statement: Statement, parameters: Mapping[str, object]) -> bool:
    """Run a release or a renewal; whether it changed its row."""
    return (tx.run(statement, parameters)).rowcount == 1


def purge(tx: Transaction, *, sql: LeaseSql) -> int:
    """Delete every expired lease; how many went."""
    return (tx.run(sql.purge, {})).rowcount


def next_fence(tx: Transaction, *, sql: LeaseSql, name: str) -> int:
    """Increment the fence counter of `name`; its new value."""
    result = tx.run(sql.fence, {"name": sql.key(name)})
    return sql.fence_value(result)


def fenced_read(
    tx: Transaction, *, sql: LeaseSql, statement: Statement, parameters: Mapping[str, object]
) -> int | None:
    """Run a conditional fence (`acquire_fenced`); the token it produced, if any."""
    return sql.fenced_value(tx.run(statement, parameters))


def fence_held(tx: Transaction, *, sql: LeaseSql, name: str, owner: str) -> int | None:
    """Increment the counter of `name` while `owner` holds its lease; the token, if any."""
    statement = sql.fence_held
    if statement is None:  # pragma: no cover - every dialect has one form or the other
        raise NotImplementedError(f"the {sql.dialect_names[0]} dialect cannot fence")
    parameters = {"name": sql.key(name), "owner": owner}
    return sql.fenced_value(tx.run(statement, parameters))


def won_many(
    tx: Transaction, *, batches: LeaseBatches, requests: Sequence[Request], fenced: bool
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


def deleted_many(
    tx: Transaction, *, batches: LeaseBatches, held: Sequence[tuple[object, str]]
) -> set[tuple[object, str]]:
    """Release each `(key, owner)` of `held` still that owner's; the pairs deleted."""
    if not batches.releases_counted:
        reply = tx.run(*batches.released(held))
        return {(row[0], row[1]) for row in reply.fetchall()}
    # Grouped releases are the lock's own engine's, on the driver path (`run_each`).
    assert tx.run_each is not None
    return batches.deleted_by_counts(held, tx.run_each(*batches.released(held)))


def rowcount(tx: Transaction, *, bound: Bound) -> int:
    """Run a bound statement; how many rows it matched."""
    return (tx.run(*bound)).rowcount


def queue_join(tx: Transaction, *, sql: LeaseSql, name: str, ticket: str, ttl: object) -> bool:
    """Queue `ticket` at the end of `name`'s waiters, alive for `ttl` (`sql.ttl`)."""
    parameters = {"name": sql.key(name), "ticket": ticket, "ttl": ttl}
    return (tx.run(sql.queue_join, parameters)).rowcount == 1


def queue_first(tx: Transaction, *, sql: LeaseSql, name: str) -> list[str]:
    """The ticket of `name`'s first live waiter, alone in a list; empty when none waits."""
    row = (tx.run(sql.queue_first, {"name": sql.key(name)})).fetchone()
    return [] if row is None else [str(row[0])]
