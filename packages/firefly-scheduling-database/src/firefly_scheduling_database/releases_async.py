"""The database lock's releases: each alone, or those waiting for one another together.

A resident node ends the fires of an instant together, and one statement per release
kept the ones behind it waiting for a pooled connection. So, on the lock's own engine
and where the dialect answers a batch of releases (`LeaseBatches.answers_releases`),
the releases that wait for one another go as one round trip (`grouped`). Each lease
is deleted only while it carries its own owner token, and each answer is read from
what the server says it deleted, never inferred from another's. A batch of
acquisitions that failed gives back here what it may have taken (`give_back`).

Written once, for asyncio; `releases.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncLeaseReleases LeaseReleases
# async-to-sync: rename grouped_async grouped
# async-to-sync: rename AsyncGroupedCalls GroupedCalls
# async-to-sync: rename AsyncTransactions Transactions
# async-to-sync: rename operations_async operations

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from functools import partial

from firefly_scheduling.concurrency.grouped_async import AsyncGroupedCalls
from firefly_scheduling_database import operations_async
from firefly_scheduling_database.protocol.dialect import LeaseBatches, LeaseSql, Request
from firefly_scheduling_database.transactions_async import AsyncTransactions

#: Most releases sent in one statement, where the dialect's batches set no bound of
#: their own (`LeaseBatches.most_releases`: MySQL's is lower).
RELEASES_PER_STATEMENT = 500


class AsyncLeaseReleases:
    """Sends one lock's releases: alone, or grouped where `grouped` is not None.

    `grouped` only on the lock's own engine (`own_engine`): on a caller's engine or
    connection each release stays a statement of its own. `driver_errors` are the
    errors a give-back ignores.
    """

    def __init__(
        self,
        transactions: AsyncTransactions,
        sql: LeaseSql,
        batches: LeaseBatches | None,
        *,
        own_engine: bool,
        driver_errors: tuple[type[BaseException], ...],
    ) -> None:
        self._transactions = transactions
        self._sql = sql
        self._batches = batches
        self._driver_errors = driver_errors
        #: The releases waiting for one another, sent together (`_together`).
        self.grouped: AsyncGroupedCalls[tuple[object, str], bool] | None = None
        if own_engine and batches is not None and batches.answers_releases:
            most = batches.most_releases or RELEASES_PER_STATEMENT
            self.grouped = AsyncGroupedCalls(self._together, most=most)

    async def release(self, name: str, owner: str) -> bool:
        """Delete the lease of `name` if `owner` still holds it; whether it did."""
        key = self._sql.key(name)
        if self.grouped is not None:
            return await self.grouped.call((key, owner))
        return await self._alone(key, owner)

    async def give_back(self, requests: Sequence[Request]) -> None:
        """Release what a failed batch may have taken: one statement, errors ignored."""
        batches = self._batches
        if batches is None or batches.one_statement:
            return
        held = [(key, owner) for key, owner, _ in requests]
        with suppress(*self._driver_errors):
            await self._transactions.run(
                partial(operations_async.rowcount, bound=batches.release(held))
            )

    async def _alone(self, key: object, owner: str) -> bool:
        parameters = {"name": key, "owner": owner}
        return await self._transactions.run(
            partial(
                operations_async.changed_one, statement=self._sql.release, parameters=parameters
            )
        )

    async def _together(self, held: Sequence[tuple[object, str]]) -> list[bool]:
        """The releases that waited for one another: one round trip, an answer each.

        Each answer is read from the rows the statement returned (PostgreSQL, SQLite),
        or from the row count of the lease's own DELETE in a text of one per lease
        (MySQL, `LeaseBatches.releases_counted`). A group that fails is that error for
        each of its callers. A lone release is sent alone, in its own cheaper statement.
        """
        if len(held) == 1:
            return [await self._alone(*held[0])]
        batches = self._batches
        assert batches is not None  # grouped releases are only made where it answers them
        deleted = await self._transactions.run(
            partial(operations_async.deleted_many, batches=batches, held=held)
        )
        return [pair in deleted for pair in held]
