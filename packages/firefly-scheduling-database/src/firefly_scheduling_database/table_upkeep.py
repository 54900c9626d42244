# Generated from table_upkeep_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""The database lock's tables: created on request, and kept free of expired leases.

Fire claims are never released, only left to expire, so their rows would stay in the
lease table forever: every instance built on a URL or an engine deletes the expired
ones about once a minute, at the end of an acquisition, with jitter so a fleet's
nodes do not purge the same rows at the same moment. An instance on a caller's
connection never purges: its statement would run inside the caller's transaction.

Written once, for asyncio; `table_upkeep.py` is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from functools import partial

from sqlalchemy import Connection, inspect
from sqlalchemy.exc import SQLAlchemyError

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling_database import operations
from firefly_scheduling_database.protocol.dialect import LeaseSql
from firefly_scheduling_database.schema import LeaseTables, create_if_absent
from firefly_scheduling_database.transactions import Transactions

logger = logging.getLogger("firefly_scheduling.locks")

#: Seconds between two purges of expired leases by one instance (with up to 50 % jitter).
PURGE_INTERVAL_SECONDS = 60.0


class LeaseTableUpkeep:
    """Creates one lock's tables (`install`) and purges its expired leases (`purge`).

    `describe` is the lock's own reading of a driver error, without credentials;
    `purges` is False where a purge would run inside a caller's transaction.
    """

    def __init__(
        self,
        transactions: Transactions,
        sql: LeaseSql,
        tables: LeaseTables,
        *,
        target: str,
        describe: Callable[[BaseException], str],
        purges: bool,
    ) -> None:
        self._transactions = transactions
        self._sql = sql
        self._tables = tables
        self._target = target
        self._describe = describe
        self._purges = purges
        #: The monotonic instant from which the next acquisition purges.
        self.next_purge = time.monotonic() + _purge_pause() / 2

    def install(self) -> None:
        """Create every table if it is absent; safe to run again and on several nodes."""
        for table in self._tables.all:
            try:
                self._transactions.run_on_sqlalchemy(partial(create_if_absent, table=table))
            except SQLAlchemyError as err:
                # Two nodes creating the same table at once: one loses on the catalog.
                if self._exists(table.name):
                    continue
                raise LockBackendError(
                    f"database lock backend {self._target} could not create table "
                    f"{table.name!r}: {self._describe(err)}"
                ) from err

    def purge(self) -> int:
        """Delete every expired lease row in one statement; how many went."""
        return self._transactions.run(partial(operations.purge, sql=self._sql))

    def purge_when_due(self) -> None:
        """Purge expired leases about once a minute; a failure only delays the next one."""
        if not self._purges or time.monotonic() < self.next_purge:
            return
        self.next_purge = time.monotonic() + _purge_pause()
        try:
            purged = self.purge()
        except SQLAlchemyError as err:
            logger.debug("database lock %s: purging expired leases failed: %s", self._target, err)
        else:
            logger.debug("database lock %s: purged %d expired leases", self._target, purged)

    def _exists(self, table: str) -> bool:
        def exists(connection: Connection) -> bool:
            return inspect(connection).has_table(table)

        try:
            found = self._transactions.run_on_sqlalchemy(exists)
        except SQLAlchemyError:
            return False
        return found


def _purge_pause() -> float:
    # Jitter keeps a fleet's nodes from purging the same rows at the same moment.
    return PURGE_INTERVAL_SECONDS * random.uniform(1.0, 1.5)  # noqa: S311 - not a secret
