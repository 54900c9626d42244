"""Two nodes' batches of claims must not deadlock on PostgreSQL, whatever their order.

A resident host claims the fires of one instant in one statement (`CLAIM_MANY`, one
transaction). Every node sends the same names at once, and each row a statement
inserts stays locked until the statement ends; a node whose batch came in a
different order (its jobs were submitted in another order, or one node's batch also
holds a late instant) could take row `b` and wait for `a` while another took `a`
and waits for `b`. PostgreSQL then aborts one of them after `deadlock_timeout`: a
whole batch of fires unknown and skipped, on a healthy server. The batch is now sent
in name order, the order every node uses, so one waits for the other instead.

The other node is a second client on the real server: inside an open transaction
it claims `a`, the lock's batch (`b` then `a`) is seen waiting by a third client,
and the second client then claims `b`. Before the fix that closed the cycle.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable

import psycopg
import pytest

from firefly_scheduling import LockBackendError
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock
from firefly_scheduling_postgres.protocol import CLAIM_TABLE

CLAIM_ROW = (
    f"INSERT INTO {CLAIM_TABLE} (name, expires_at)"
    " VALUES (%s, now() + interval '30 seconds') ON CONFLICT (name) DO NOTHING"
)
WAITING_ON_A_ROW = (
    "SELECT count(*) FROM pg_stat_activity"
    " WHERE wait_event_type = 'Lock' AND pid <> %s AND query LIKE %s"
)


def _other_node_claims_around(
    postgres_url: str, first: str, second: str, batch: Callable[[], object]
) -> object:
    """Claim `first`, let `batch` start and wait on it, claim `second`, commit."""
    with (
        psycopg.connect(postgres_url, connect_timeout=5) as other,
        psycopg.connect(postgres_url, autocommit=True, connect_timeout=5) as watcher,
    ):
        other.execute("SET lock_timeout = '10s'")
        other.execute(CLAIM_ROW, (first,))
        answers: list[object] = []
        runner = threading.Thread(target=lambda: answers.append(batch()), daemon=True)
        runner.start()
        deadline = time.monotonic() + 10
        pattern = f"%{CLAIM_TABLE}%unnest%"
        while watcher.execute(WAITING_ON_A_ROW, (other.info.backend_pid, pattern)).fetchone() != (
            1,
        ):
            assert time.monotonic() < deadline, "the batch never waited for the other node's row"
            time.sleep(0.01)
        other.execute(CLAIM_ROW, (second,))  # DeadlockDetected here before the fix
        other.commit()
        runner.join(timeout=10)
        assert answers, "the batch never finished"
        return answers[0]


@pytest.fixture
def names() -> tuple[str, str]:
    prefix = f"batch-order:{uuid.uuid4().hex}"
    return f"{prefix}:a", f"{prefix}:b"


def test_batches_in_opposite_orders_wait_instead_of_deadlocking(
    postgres_url: str, names: tuple[str, str]
) -> None:
    first, second = names
    lock = PgAdvisoryLock(postgres_url)
    try:
        assert lock.try_claim(f"{first}:table", 30)  # the claim table exists
        answers = _other_node_claims_around(
            postgres_url, first, second, lambda: lock.try_claim_many([(second, 30), (first, 30)])
        )
    finally:
        lock.close()
    # Both claimed by the other node, which committed; not a deadlock's error.
    assert answers == [False, False]


def test_asyncio_batches_in_opposite_orders_wait_instead_of_deadlocking(
    postgres_url: str, names: tuple[str, str]
) -> None:
    first, second = names

    async def claim_both() -> list[bool | LockBackendError]:
        lock = AsyncPgAdvisoryLock(postgres_url)
        try:
            return await lock.try_claim_many([(second, 30), (first, 30)])
        finally:
            await lock.aclose()

    async def create_table() -> None:
        lock = AsyncPgAdvisoryLock(postgres_url)
        try:
            assert await lock.try_claim(f"{first}:table", 30)
        finally:
            await lock.aclose()

    asyncio.run(create_table())
    answers = _other_node_claims_around(
        postgres_url, first, second, lambda: asyncio.run(claim_both())
    )
    assert answers == [False, False]
