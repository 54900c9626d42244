"""MemcachedLock against a private memcached that the tests restart and fill up.

The shared server is never stopped or filled: every test here starts its own small
`memcached` on a free port. Its outages are the shared `OutageContract`'s.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from functools import partial
from pathlib import Path

import pytest
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheServerError

from firefly_scheduling import LockBackendError
from firefly_scheduling.testing import OutageContract
from firefly_scheduling.testing.local_server import LocalServer, running_as_root
from firefly_scheduling_memcached import AsyncMemcachedLock, MemcachedLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from threads_together import run_together

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


class TestMemcachedOutage(OutageContract):
    pytestmark = pytest.mark.slow
    restart_keeps_locks = False  # memcached keeps nothing across a restart

    @pytest.fixture
    def restartable_server(self, private_server: LocalServer) -> LocalServer:
        return private_server

    @pytest.fixture
    def lock_factory(self, private_server: LocalServer) -> partial[MemcachedLock]:
        return partial(MemcachedLock, url_of(private_server))


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


# -- the connection pool, counted by the server ------------------------------------------


@pytest.fixture
def observer(private_server: LocalServer) -> Iterator[Client]:
    """One connection that stays open, so counting connections opens none."""
    client = Client(("127.0.0.1", private_server.port), timeout=3)
    client.stats()
    yield client
    client.close()


def connections_accepted(observer: Client) -> int:
    """How many connections the server has accepted so far."""
    return int(observer.stats()[b"total_connections"])


def connections_accepted_once_settled(observer: Client) -> int:
    """The count once it stops moving: memcached counts a connection when one of its
    worker threads takes it up, which a loaded machine delays (the start-up probe of
    `LocalServer` was seen counted late)."""
    count = connections_accepted(observer)
    for _ in range(20):
        time.sleep(0.25)
        again = connections_accepted(observer)
        if again == count:
            break
        count = again
    return count


def test_a_hundred_coroutines_share_at_most_pool_size_connections(
    private_server: LocalServer, observer: Client
) -> None:
    url = url_of(private_server)

    async def crowd() -> None:
        lock = AsyncMemcachedLock(url, pool_size=3)

        async def worker(index: int) -> None:
            for round_ in range(5):
                name = f"pool:{index}:{round_}"
                assert await lock.try_acquire(name, 30)
                assert await lock.renew(name, 30)
                await lock.release(name)
                assert lock.is_held(name) is False

        try:
            await asyncio.gather(*(worker(index) for index in range(100)))
        finally:
            await lock.aclose()

    before = connections_accepted_once_settled(observer)
    asyncio.run(crowd())
    opened = connections_accepted(observer) - before
    assert 1 <= opened <= 3


def test_threads_share_at_most_pool_size_connections(
    private_server: LocalServer, observer: Client
) -> None:
    lock = MemcachedLock(url_of(private_server), pool_size=3)

    def worker(index: int) -> None:
        for round_ in range(20):
            name = f"pool:{index}:{round_}"
            assert lock.try_acquire(name, 30)
            lock.release(name)

    before = connections_accepted_once_settled(observer)
    failures = run_together(worker, range(20), timeout=60)
    lock.close()
    assert failures == []
    opened = connections_accepted(observer) - before
    assert 1 <= opened <= 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_speaks_on_connections_of_its_own(
    private_server: LocalServer, observer: Client
) -> None:
    """Parent and child hammer one inherited instance at once; no reply goes astray."""
    lock = MemcachedLock(url_of(private_server), pool_size=1)
    assert lock.try_acquire("fork:before", 30)  # the pool now keeps one open connection
    before = connections_accepted_once_settled(observer)

    def hammer(who: str) -> None:
        for index in range(300):
            name = f"fork:{who}:{index}"
            if not (lock.try_acquire(name, 30) and lock.renew(name, 30)):
                raise AssertionError(f"{who} lost uncontended {name}")
            lock.release(name)
            if lock.is_held(name):
                raise AssertionError(f"{who} still holds {name}")

    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 1
        try:
            hammer("child")
            code = 0
        finally:
            os._exit(code)
    try:
        hammer("parent")
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's replies went astray"
    # The child opened one connection of its own (the parent reused its own).
    assert connections_accepted(observer) - before == 1
    lock.release("fork:before")
    lock.close()


def test_an_async_lock_serves_one_event_loop_after_another(private_server: LocalServer) -> None:
    """Connections belong to the event loop that opened them; a new loop opens its own."""
    lock = AsyncMemcachedLock(url_of(private_server))

    async def cycle(name: str) -> None:
        assert await lock.try_acquire(name, 30)
        await lock.release(name)

    asyncio.run(cycle("loops:first"))
    asyncio.run(cycle("loops:second"))
    asyncio.run(lock.aclose())


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and reads requests, but never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    done.set()
    thread.join(timeout=5)
    for connection in accepted:
        connection.close()
    listener.close()


@pytest.mark.slow
@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_a_server_that_never_answers_fails_the_call_within_its_timeout(
    silent_server: int, flavour: str
) -> None:
    url = f"memcached://127.0.0.1:{silent_server}"
    started = time.monotonic()
    with pytest.raises(LockBackendError, match="TimeoutError") as caught:
        attempt(flavour, url, fenced=False)
    elapsed = time.monotonic() - started
    # The bound is CLIENT_DEFAULTS["timeout"] (3 s): once per read for the blocking
    # socket, once per operation for asyncio.
    assert 2.9 <= elapsed < 10, elapsed
    assert "127.0.0.1" in str(caught.value)
