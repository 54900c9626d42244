"""A renewal that hangs does not hide the lease's lapse: the holder is told its lock is
lost when its lease passes, while that renewal is still unanswered, on a real Redis
behind a proxy that stalls the holder's connection (a frozen connection, as the fault
checker's `freeze`).

The stall outlasts the Redis client's 3 s socket timeout, so the renewal in flight
cannot come back before then. Evidence: the moment the keep-alive reports the loss
(its `on_lost`, stamped with the monotonic clock) comes well before that timeout,
and a second client, connected straight to the server, then takes the name while the
holder is still stalled: the lease had really ended. Before, a hung renewal told
nothing until it returned, and the process's one renewer thread waited with it.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

from chaos_harness.proxy import FaultyProxy
from firefly_scheduling.locks.asyncio_keepalive import AsyncKeepAlive
from firefly_scheduling.locks.keepalive import KeepAlive
from firefly_scheduling_redis import AsyncRedisLock, RedisLock

TTL = 1.0
#: The Redis clients' socket timeout: a renewal sent into the stall returns no sooner.
SOCKET_TIMEOUT = 3.0
#: Longer than the socket timeout: the renewal in flight fails at it, not before.
STALL_SECONDS = 6.0
PATIENCE = 10.0


class Report:
    """When (monotonic) the keep-alive reported the loss, through its `on_lost`."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.told = threading.Event()

    def __call__(self) -> None:
        self.at = time.monotonic()
        self.told.set()


def _check(report: Report, stalled_at: float, other: RedisLock, name: str) -> None:
    """Told within the lease, before the renewal could return; and the name was free
    on the server while the holder was still stalled."""
    assert report.told.wait(PATIENCE), "the loss was never reported"
    assert report.at is not None
    assert report.at - stalled_at < SOCKET_TIMEOUT, "reported only once the renewal came back"
    give_up = time.monotonic() + PATIENCE
    while not other.try_acquire(name, 30):
        assert time.monotonic() < give_up, "the stalled holder's lease never ended"
        time.sleep(0.01)
    assert time.monotonic() - stalled_at < STALL_SECONDS, "taken only after the stall"


def test_a_hung_renewal_reports_the_lapse_while_it_is_unanswered(
    redis_url: str, proxied_redis_url: tuple[str, FaultyProxy]
) -> None:
    url, proxy = proxied_redis_url
    lock, other = RedisLock(url), RedisLock(redis_url)
    name = f"frozen-renewal:{uuid.uuid4().hex}"
    report = Report()
    try:
        holding = lock.acquire(name, TTL)
        assert holding is not None
        with KeepAlive(lock, holding, TTL, interval=TTL / 3, on_lost=report) as keep:
            time.sleep(TTL / 2)  # renewed once at least, through the proxy
            proxy.stall(STALL_SECONDS)
            _check(report, time.monotonic(), other, name)
            assert keep.lost.is_set()
            assert holding.lost
    finally:
        other.release(name)
        lock.close()
        other.close()


def test_a_hung_asyncio_renewal_reports_the_lapse_while_it_is_unanswered(
    redis_url: str, proxied_redis_url: tuple[str, FaultyProxy]
) -> None:
    url, proxy = proxied_redis_url
    other = RedisLock(redis_url)
    name = f"frozen-renewal:{uuid.uuid4().hex}"
    report = Report()

    async def scenario() -> None:
        lock = AsyncRedisLock(url)
        try:
            holding = await lock.acquire(name, TTL)
            assert holding is not None
            keep = AsyncKeepAlive(lock, holding, TTL, interval=TTL / 3, on_lost=report).start()
            try:
                await asyncio.sleep(TTL / 2)
                proxy.stall(STALL_SECONDS)
                await asyncio.to_thread(_check, report, time.monotonic(), other, name)
                assert keep.lost.is_set()
                assert holding.lost
            finally:
                await keep.stop()
        finally:
            await lock.aclose()

    try:
        asyncio.run(scenario())
    finally:
        other.release(name)
        other.close()
