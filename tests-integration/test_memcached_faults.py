"""MemcachedLock against a private memcached that the tests restart and fill up.

The shared server is never stopped or filled: every test here starts its own small
`memcached` on a free port.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing

import pytest
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheServerError

from firefly_scheduling import LockBackendError
from firefly_scheduling.testing.local_server import LocalServer, running_as_root
from firefly_scheduling_memcached import AsyncMemcachedLock, MemcachedLock

NAME = "memcached-faults:job"
#: Enough same-sized items to cycle a 2 MB server's memory several times over.
FILLER_ITEMS = 60_000


def memcached(*options: str) -> Callable[[int], Sequence[str]]:
    def command(port: int) -> list[str]:
        user = ["-u", "root"] if running_as_root() else []
        return ["memcached", *user, "-l", "127.0.0.1", "-p", str(port), "-U", "0", *options]

    return command


@pytest.fixture
def private_server() -> Iterator[LocalServer]:
    with LocalServer(memcached("-m", "64")) as server:
        yield server


def url_of(server: LocalServer) -> str:
    return f"memcached://127.0.0.1:{server.port}"


def fill_with_items_the_size_of_a_lock(server: LocalServer) -> None:
    """Store items as big as a lock item, so they compete for its slab class."""
    client = Client(("127.0.0.1", server.port), timeout=3)
    key_length = len(MemcachedLock.key(NAME))
    prefix = "firefly:scheduling:filler:"
    width = key_length - len(prefix)
    try:
        for start in range(0, FILLER_ITEMS, 1000):
            batch = {f"{prefix}{i:0{width}d}": b"x" * 32 for i in range(start, start + 1000)}
            client.set_many(batch, noreply=False)
    finally:
        client.close()


@pytest.mark.slow
def test_an_outage_raises_then_the_next_call_reconnects_and_the_lock_is_gone(
    private_server: LocalServer,
) -> None:
    holder, other = MemcachedLock(url_of(private_server)), MemcachedLock(url_of(private_server))
    assert holder.try_acquire(NAME, 60)
    private_server.stop()

    started = time.monotonic()
    with pytest.raises(LockBackendError, match="memcached lock backend"):
        other.try_acquire(NAME, 60)
    assert time.monotonic() - started < 10
    holder.release(NAME)  # logs, never raises; the lease is kept for a later release
    assert holder.is_held(NAME)

    private_server.start()
    # memcached keeps nothing across a restart: the lock is free again.
    assert other.try_acquire(NAME, 60)
    assert holder.renew(NAME, 60) is False
    assert holder.is_lost(NAME)
    other.release(NAME)


@pytest.mark.slow
def test_a_connection_the_server_closed_is_replaced_before_use(
    private_server: LocalServer,
) -> None:
    lock = MemcachedLock(url_of(private_server))
    assert lock.try_acquire(NAME, 60)
    private_server.stop()
    private_server.start()
    # No call failed in between, so only the closed socket tells of the restart.
    assert lock.try_acquire(NAME + ":after", 60)
    lock.release(NAME + ":after")


@pytest.mark.slow
def test_fence_tokens_keep_increasing_across_a_restart(private_server: LocalServer) -> None:
    lock = MemcachedLock(url_of(private_server))
    before = lock.try_acquire_fenced(NAME, 60)
    assert before is not None
    lock.release(NAME)
    private_server.stop()
    private_server.start()
    after = lock.try_acquire_fenced(NAME, 60)
    assert after is not None
    assert after > before
    lock.release(NAME)


@pytest.mark.slow
def test_without_m_a_full_server_evicts_a_held_lock() -> None:
    with LocalServer(memcached("-m", "2")) as server:
        holder, other = MemcachedLock(url_of(server)), MemcachedLock(url_of(server))
        assert holder.try_acquire(NAME, 3600)
        fill_with_items_the_size_of_a_lock(server)
        # The documented pitfall: another node now wins a lock that is still held...
        assert other.try_acquire(NAME, 3600)
        # ...and the holder finds out at its next renewal.
        assert holder.renew(NAME, 3600) is False
        assert holder.is_lost(NAME)


@pytest.mark.slow
def test_with_m_a_full_server_keeps_held_locks_and_refuses_writes_loudly() -> None:
    with LocalServer(memcached("-m", "2", "-M")) as server:
        holder, other = MemcachedLock(url_of(server)), MemcachedLock(url_of(server))
        assert holder.try_acquire(NAME, 3600)
        with pytest.raises(MemcacheServerError, match="out of memory"):
            fill_with_items_the_size_of_a_lock(server)
        # New locks fail loudly instead of evicting anything...
        with pytest.raises(LockBackendError, match="out of memory"):
            other.try_acquire(NAME + ":new", 3600)
        # ...and so does a renewal, which stores a new version of the item (the
        # documented cost of -M without headroom): the lock is reported lost...
        assert holder.renew(NAME, 3600) is False
        # ...although it is still on the server, where a release (which allocates
        # nothing) can still delete it.
        key = MemcachedLock.key(NAME)
        observer = Client(("127.0.0.1", server.port), timeout=3)
        assert observer.get(key) is not None
        holder.release(NAME)
        assert observer.get(key) is None
        observer.close()


@pytest.mark.slow
@pytest.mark.parametrize("fenced", [False, True], ids=["plain", "fenced"])
@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_with_m_a_refused_attempt_on_a_full_server_never_frees_the_held_lock(
    fenced: bool, flavour: str
) -> None:
    """memcached's meta set (`ms`, any mode) unlinks the item it fails to replace.

    On a full `-M` server, `ms <key> ... ME` from a contender is refused for lack of
    memory, and memcached 1.6 then deletes the existing item: the holder's lock. The
    classic `add` and `cas` commands leave it alone, so the lock uses those to store.
    """
    with LocalServer(memcached("-m", "2", "-M")) as server:
        holder = MemcachedLock(url_of(server))
        assert holder.try_acquire(NAME, 3600)
        with pytest.raises(MemcacheServerError, match="out of memory"):
            fill_with_items_the_size_of_a_lock(server)
        observer = Client(("127.0.0.1", server.port), timeout=3)
        held = observer.get(MemcachedLock.key(NAME))
        assert held is not None
        with pytest.raises(LockBackendError, match="out of memory"):
            attempt(flavour, url_of(server), fenced=fenced)
        assert observer.get(MemcachedLock.key(NAME)) == held, "a refused attempt freed the lock"
        # The holder still owns it: renewing fails for memory, but keeps it too.
        assert holder.renew(NAME, 3600) is False
        assert observer.get(MemcachedLock.key(NAME)) == held
        observer.close()


def attempt(flavour: str, url: str, *, fenced: bool) -> None:
    """One acquisition attempt on `NAME` by a fresh instance of the given flavour."""
    if flavour == "sync":
        with closing(MemcachedLock(url)) as lock:
            (lock.try_acquire_fenced if fenced else lock.try_acquire)(NAME, 3600)
        return

    async def attempt_async() -> None:
        lock = AsyncMemcachedLock(url)
        try:
            await (lock.try_acquire_fenced if fenced else lock.try_acquire)(NAME, 3600)
        finally:
            await lock.aclose()

    asyncio.run(attempt_async())


def test_a_server_without_cas_never_gets_a_blind_delete(caplog: pytest.LogCaptureFixture) -> None:
    with LocalServer(memcached("-C")) as server:
        holder, other = MemcachedLock(url_of(server)), MemcachedLock(url_of(server))
        assert holder.try_acquire(NAME, 60)
        with caplog.at_level(logging.WARNING, logger="firefly_scheduling.locks"):
            holder.release(NAME)
            assert holder.renew(NAME, 60) is False
        assert "runs with -C, which disables CAS" in caplog.text
        # The lock was left to expire rather than deleted without a compare-and-swap.
        assert other.try_acquire(NAME, 60) is False
