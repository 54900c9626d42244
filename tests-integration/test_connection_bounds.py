"""A node's connections stay within the lock's bound however many threads share the lock.

The load is a node's: 64 threads (a host's default worker ceiling) share one lock and
acquire, renew, release and claim concurrently on real servers. The count comes from
outside the code under test: the kernel's socket tables of this process
(`firefly_scheduling.testing.sockets`, per server port, so per node on a Redis
Cluster) and, for Redis, the server's own `CLIENT LIST`. Before the bound, the same
load held 64 connections to Redis and 170 to a 3-node cluster.

The session backends (postgres, mysql, database) are in test_connection_bounds_sessions.py.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
import redis

from firefly_scheduling import LockBackendError
from firefly_scheduling.concurrency.pool_size import DEFAULT_POOL_SIZE
from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling.testing.local_server import LocalServer
from firefly_scheduling.testing.sockets import PeakConnections, tcp_connections
from firefly_scheduling_etcd import EtcdLock
from firefly_scheduling_memcached import MemcachedLock
from firefly_scheduling_redis import RedisLock
from firefly_scheduling_redis.anchor_store import RedisAnchorStore

THREADS = 64
SECONDS = 3.0
#: etcd commits every write to disk: 64 threads queue on 2 to 4 connections for longer
#: than the default 3 s wait on a loaded machine. The bound is under test, not the wait.
ETCD_WAIT = "30s"

#: A bound measured under a hammer: other workers' load would starve it into reconnects.
pytestmark = [pytest.mark.slow, pytest.mark.alone]


def hammer(lock: BaseLock, *, seconds: float = SECONDS, threads: int = THREADS) -> list[str]:
    """`threads` threads sharing `lock` for `seconds`; the errors they met."""
    errors: list[str] = []
    deadline = time.monotonic() + seconds
    start = threading.Barrier(threads)

    def work() -> None:
        start.wait()
        while time.monotonic() < deadline:
            name = f"bounds:{uuid.uuid4().hex}"
            try:
                assert lock.try_acquire(name, 30)
                assert lock.renew(name, 30)
                lock.release(name)
                assert lock.try_claim(f"{name}:claim", 5)
            except Exception as err:  # noqa: BLE001 - every failure is evidence
                errors.append(f"{type(err).__name__}: {err}")

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return errors


def ports_of(url: str, *, cluster_ports: tuple[int, ...] = ()) -> tuple[int, ...]:
    return cluster_ports or (urlsplit(url).port or 0,)


@pytest.fixture
def cluster_ports(redis_cluster_url: str) -> tuple[int, ...]:
    """The ports of every primary of the test cluster, read from the cluster itself."""
    parts = urlsplit(redis_cluster_url)
    client = redis.cluster.RedisCluster(host=parts.hostname, port=parts.port or 6379)
    try:
        primaries = client.get_primaries()  # type: ignore[no-untyped-call]
        return tuple(sorted(node.port for node in primaries))
    finally:
        client.close()


def check_bound(
    lock: BaseLock, ports: tuple[int, ...], bound: int, *, seconds: float = SECONDS
) -> None:
    try:
        with PeakConnections(ports) as peak:
            errors = hammer(lock, seconds=seconds)
    finally:
        lock.close()
    assert errors == []
    assert max(peak.peak.values()) >= 1, f"no connection seen on {ports}: the count is blind"
    assert all(count <= bound for count in peak.peak.values()), peak.peak


def test_redis_holds_at_most_four_connections(redis_url: str) -> None:
    check_bound(RedisLock(redis_url), ports_of(redis_url), DEFAULT_POOL_SIZE)


def test_redis_cluster_holds_at_most_four_connections_per_node(
    redis_cluster_url: str, cluster_ports: tuple[int, ...]
) -> None:
    check_bound(RedisLock(redis_cluster_url), cluster_ports, DEFAULT_POOL_SIZE)


@pytest.mark.parametrize("kind", ["lock", "anchor store"])
def test_closing_a_cluster_client_built_from_a_url_closes_every_connection(
    kind: str, redis_cluster_url: str, cluster_ports: tuple[int, ...]
) -> None:
    """redis-py's cluster client from a URL gives each node a pool its `close()` left
    open (redis-py 8.1): each closed lock kept a connection per node until the garbage
    collector found it, and the next test's bound counted them."""
    gc.collect()  # what earlier tests left to the collector is not this test's
    before = tcp_connections(os.getpid(), cluster_ports)
    user: RedisLock | RedisAnchorStore
    if kind == "lock":
        user = lock = RedisLock(redis_cluster_url)
        for index in range(30):  # names on every node's slots
            assert lock.try_acquire(f"close-{uuid.uuid4().hex}-{index}", 5)
    else:
        user = store = RedisAnchorStore(redis_cluster_url)
        store.now()
    opened = tcp_connections(os.getpid(), cluster_ports)
    user.close()
    assert sum(opened.values()) > sum(before.values()), "the count is blind"
    assert tcp_connections(os.getpid(), cluster_ports) == before


def test_memcached_holds_at_most_four_connections(memcached_url: str) -> None:
    check_bound(MemcachedLock(memcached_url), ports_of(memcached_url), DEFAULT_POOL_SIZE)


def test_etcd_holds_at_most_four_connections_and_threads_never_break_a_socket(
    etcd_url: str,
) -> None:
    """Also the regression for "ReadError: Bad file descriptor": threads sharing one
    httpx client pool had a connection closed under a response being read."""
    lock = EtcdLock(f"{etcd_url}?timeout={ETCD_WAIT}")
    check_bound(lock, ports_of(etcd_url), DEFAULT_POOL_SIZE, seconds=8.0)


@pytest.mark.parametrize("backend", ["redis", "etcd", "memcached"])
def test_the_bound_follows_pool_size_in_the_url(
    backend: str, redis_url: str, etcd_url: str, memcached_url: str
) -> None:
    url = {"redis": redis_url, "etcd": etcd_url, "memcached": memcached_url}[backend]
    lock: BaseLock
    if backend == "redis":
        lock = RedisLock(f"{url}?pool_size=2")
    elif backend == "etcd":
        lock = EtcdLock(f"{url}?pool_size=2&timeout={ETCD_WAIT}")
    else:
        lock = MemcachedLock(f"{url}?pool_size=2")
    check_bound(lock, ports_of(url), 2)


def test_redis_counts_agree_with_the_servers_client_list(redis_url: str) -> None:
    """The server's view: the clients named by this lock's URL, seen from a second client."""
    name = f"bounds-{uuid.uuid4().hex[:8]}"
    lock = RedisLock(f"{redis_url}?client_name={name}")
    admin = redis.Redis.from_url(redis_url)
    seen = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal seen
        while not stop.is_set():
            clients = admin.client_list()
            seen = max(seen, sum(1 for client in clients if client.get("name") == name))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        errors = hammer(lock)
    finally:
        stop.set()
        watcher.join()
        lock.close()
        admin.close()
    assert errors == []
    assert 1 <= seen <= DEFAULT_POOL_SIZE


def test_the_redis_anchor_store_holds_at_most_four_connections(redis_url: str) -> None:
    store = RedisAnchorStore(redis_url)
    errors: list[str] = []

    def work() -> None:
        for _ in range(50):
            try:
                store.now()
            except Exception as err:  # noqa: BLE001 - every failure is evidence
                errors.append(repr(err))

    try:
        with PeakConnections(ports_of(redis_url)) as peak:
            workers = [threading.Thread(target=work) for _ in range(THREADS)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
    finally:
        store.close()
    assert errors == []
    assert 1 <= peak.total <= DEFAULT_POOL_SIZE


# -- exhaustion: a private server, paused, so the shared one is never disturbed ------------


@pytest.fixture
def paused_redis() -> Iterator[Callable[[float], None]]:
    """A private redis-server, and a way to pause its clients' writes for some seconds."""

    def command(port: int) -> list[str]:
        return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]

    with LocalServer(command) as server:
        admin = redis.Redis(port=server.port)

        def pause(seconds: float) -> None:
            admin.client_pause(int(seconds * 1000), all=False)  # writes only

        pause.port = server.port  # type: ignore[attr-defined]
        yield pause
        admin.close()


def test_a_caller_that_waits_past_the_bound_gets_a_backend_error_naming_it(
    paused_redis: Callable[[float], None],
) -> None:
    port = paused_redis.port  # type: ignore[attr-defined]
    # Commands may take 10 s, so the one in flight outlasts the 3 s wait for a slot.
    lock = RedisLock(f"redis://127.0.0.1:{port}/0?socket_timeout=10&pool_size=1")
    try:
        assert lock.try_acquire("warm-up", 30)  # the one connection is open
        paused_redis(5.0)
        holder = threading.Thread(target=lock.try_acquire, args=("stuck", 30))
        holder.start()
        time.sleep(0.3)  # the holder's SET is in flight, paused by the server
        with pytest.raises(LockBackendError) as raised:
            lock.try_acquire("waiting", 30)
        holder.join()
    finally:
        lock.close()
    message = str(raised.value)
    assert "PoolExhaustedError" in message
    assert "all 1 connections" in message
    assert "pool_size=1" in message
