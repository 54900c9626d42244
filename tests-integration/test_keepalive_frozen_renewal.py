"""A renewal that hangs does not hide the lease's lapse: the holder is told its lock is
lost before another client can hold the name, on a real Redis behind a proxy that
stalls the holder's connection (a frozen connection, as the fault checker's `freeze`).

The evidence is the server's: a second client, connected directly, takes the name
once the lease ended there; at that moment the keep-alive of the first holder has
already set its `lost` event, although its renewal is still unanswered. Before, a
hung renewal told nothing until it returned, and the process's one renewer thread
waited with it.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from firefly_scheduling.locks.asyncio_keepalive import AsyncKeepAlive
from firefly_scheduling.locks.keepalive import KeepAlive
from firefly_scheduling_redis import AsyncRedisLock, RedisLock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from chaos_harness.proxy import FaultyProxy

TTL = 1.0
#: Far longer than the lease: the renewal sent during it is answered only after it.
STALL_SECONDS = 6.0
PATIENCE = 10.0


@pytest.fixture
def proxy(redis_url: str) -> Iterator[FaultyProxy]:
    server = urlsplit(redis_url)
    running = FaultyProxy(server.hostname or "127.0.0.1", server.port or 6379).start()
    try:
        yield running
    finally:
        running.close()


def _through(redis_url: str, proxy: FaultyProxy) -> str:
    server = urlsplit(redis_url)
    return server._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()


def _taken_by_another(other: RedisLock, name: str) -> float:
    """Wait until `other`, straight to the server, holds `name`; when (monotonic)."""
    give_up = time.monotonic() + PATIENCE
    while not other.try_acquire(name, 30):
        assert time.monotonic() < give_up, "the stalled holder's lease never ended"
        time.sleep(0.01)
    return time.monotonic()


def test_a_hung_renewal_reports_the_lapse_before_another_client_holds_the_name(
    redis_url: str, proxy: FaultyProxy
) -> None:
    lock, other = RedisLock(_through(redis_url, proxy)), RedisLock(redis_url)
    name = f"frozen-renewal:{uuid.uuid4().hex}"
    try:
        holding = lock.acquire(name, TTL)
        assert holding is not None
        with KeepAlive(lock, holding, TTL, interval=TTL / 3) as keep:
            time.sleep(TTL / 2)  # renewed once at least, through the proxy
            proxy.stall(STALL_SECONDS)
            _taken_by_another(other, name)
            assert keep.lost.is_set(), "another client holds the name, and nobody told"
            assert holding.lost
    finally:
        other.release(name)
        lock.close()
        other.close()


def test_a_hung_asyncio_renewal_reports_the_lapse_before_another_client_holds_the_name(
    redis_url: str, proxy: FaultyProxy
) -> None:
    other = RedisLock(redis_url)
    name = f"frozen-renewal:{uuid.uuid4().hex}"

    async def scenario() -> None:
        lock = AsyncRedisLock(_through(redis_url, proxy))
        try:
            holding = await lock.acquire(name, TTL)
            assert holding is not None
            keep = AsyncKeepAlive(lock, holding, TTL, interval=TTL / 3).start()
            try:
                await asyncio.sleep(TTL / 2)
                proxy.stall(STALL_SECONDS)
                await asyncio.to_thread(_taken_by_another, other, name)
                assert keep.lost.is_set(), "another client holds the name, and nobody told"
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
