"""A mixed fleet on a real etcd: asyncio fire runners and sync ones share each fire.

Three `AsyncFireRunner`s (one event loop, `AsyncEtcdLock` each) and three
`FireRunner`s (threads, `EtcdLock` each) race for the same fires. The async runner is
the source the sync one is generated from, and the two lock flavours share etcd's
keys, so exactly one node of the six runs each fire, whichever flavour it is, and
the fencing tokens the bodies see grow from fire to fire.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_etcd import AsyncEtcdLock, EtcdLock

FIRES = 5
NODES = 3


def test_sync_and_async_nodes_run_each_fire_once_with_growing_tokens(etcd_url: str) -> None:
    name = f"mixed-fleet-{uuid.uuid4().hex}"
    task = ScheduledDescriptor(
        target=f"tests:{name}", fixed_rate=1.0, lock_name=name, lock_ttl=30.0
    )
    ran: list[tuple[str, datetime, int | None]] = []
    mutex = threading.Lock()

    def record(flavour: str) -> None:
        fire = current_fire()
        assert fire is not None
        with mutex:
            ran.append((flavour, fire.instant, fire.token))

    async def async_body() -> None:
        await asyncio.sleep(0.05)
        record("async")

    def sync_body() -> None:
        record("sync")

    base = datetime.now(UTC).replace(microsecond=0)
    instants = [base - timedelta(seconds=second) for second in range(FIRES, 0, -1)]
    sync_locks = [EtcdLock(etcd_url) for _ in range(NODES)]
    sync_nodes = [FireRunner(lock, node=f"sync-{i}") for i, lock in enumerate(sync_locks)]

    async def race(instant: datetime, async_nodes: list[AsyncFireRunner]) -> list[Verdict]:
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(NODES) as pool:
            threaded = [
                loop.run_in_executor(pool, node.run, Fire.at(task, instant), sync_body)
                for node in sync_nodes
            ]
            awaited = [node.run(Fire.at(task, instant), async_body) for node in async_nodes]
            outcomes = await asyncio.gather(*threaded, *awaited)
        return [outcome.verdict for outcome in outcomes]

    async def scenario() -> list[list[Verdict]]:
        locks = [AsyncEtcdLock(etcd_url) for _ in range(NODES)]
        nodes = [AsyncFireRunner(lock, node=f"async-{i}") for i, lock in enumerate(locks)]
        try:
            return [await race(instant, nodes) for instant in instants]
        finally:
            for lock in locks:
                await lock.aclose()

    try:
        statuses = asyncio.run(scenario())
    finally:
        for lock in sync_locks:
            lock.close()
    for per_fire in statuses:
        assert per_fire.count(Verdict.SUCCEEDED) == 1, per_fire
        assert per_fire.count(Verdict.CLAIMED_ELSEWHERE) == 2 * NODES - 1, per_fire
    assert sorted(instant for _, instant, _ in ran) == instants
    tokens = [token for _, _, token in sorted(ran, key=lambda run: run[1]) if token is not None]
    assert len(tokens) == FIRES  # every run was fenced
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == FIRES
