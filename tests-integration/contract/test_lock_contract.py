"""Every server lock against the shared contract, in both flavours, on its real server.

PostgreSQL advisory locks, MySQL/MariaDB named locks, Redis (one server and a Redis
Cluster of three masters; `scripts/ensure-servers` starts both), etcd and memcached.
Each server is described once (`_Server`: its URL fixture, its two locks, a second
client that reads it, a URL on a closed port) and each contract class is that
description plus a flavour. The session servers (PostgreSQL, MySQL) also run the
session-loss contract, their sessions ended from a second client
(`session_killers`). The hostile-name cases read each name's key back with
that second client (`server_readers`), and on PostgreSQL and MySQL also run on
sessions whose settings change how SQL text is read (`session_settings`, set through
the lock's URL). The SQLAlchemy provider has its own file: it works in a table of
its own per class.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest
import redis

from firefly_scheduling.testing import (
    AsyncHostileNamesContract,
    AsyncLockContract,
    AsyncSessionLossContract,
    HostileNamesContract,
    LockContract,
    ServerReader,
    SessionLossContract,
)
from firefly_scheduling_etcd import AsyncEtcdLock, EtcdLock
from firefly_scheduling_etcd import waiter_queue as etcd_queue
from firefly_scheduling_memcached import AsyncMemcachedLock, MemcachedLock
from firefly_scheduling_memcached import waiter_queue as memcached_queue
from firefly_scheduling_mysql import AsyncMySqlNamedLock, MySqlNamedLock
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock
from firefly_scheduling_redis import AsyncRedisLock, RedisLock
from firefly_scheduling_redis.protocol import release_channel
from firefly_scheduling_redis.waiter_queue import queue_key

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # session_killers
from server_readers import (
    AdvisoryLockReader,
    EtcdReader,
    MemcachedReader,
    NamedLockReader,
    RedisReader,
)
from session_settings import MYSQL_SETTINGS, POSTGRES_SETTINGS, with_setting

from session_killers import Killer, mysql_killer, pg_killer

# An etcd or memcached URL cannot carry a password (etcd refuses user/password
# authentication at construction, the memcached text protocol has none), so their
# unreachable-server case's "never leaks" checks hold trivially there; its other
# checks (LockBackendError, fast, a release that does not raise) are as real as for
# any backend.
PASSWORD = "contract-secret"


@dataclass(frozen=True)
class Server:
    """One server: where it is, its locks, a second client of it, a closed port."""

    #: The session fixture (conftest) giving the server's URL.
    url_fixture: str
    sync_lock: Callable[[str], Any]
    async_lock: Callable[[str], Any]
    reader: Callable[[str], ServerReader]
    #: A URL whose port is closed on loopback: the connection is refused at once.
    unreachable_url: str
    #: Makes, from the server's URL, a killer of the session holding a name (a
    #: session server's; `session_killers`).
    session_killer: Callable[[str], Killer] | None = None


class _Server:
    """The fixtures every class draws from its `server`."""

    server: ClassVar[Server]

    @pytest.fixture
    def server_address(self, request: pytest.FixtureRequest) -> str:
        return str(request.getfixturevalue(self.server.url_fixture))

    @pytest.fixture
    def lock_url(self, server_address: str) -> str:
        """The locks' URL: the server's, unless a class sets its sessions up otherwise."""
        return server_address

    @pytest.fixture
    def server_reader(self, server_address: str) -> Iterator[ServerReader]:
        reader = self.server.reader(server_address)
        yield reader
        reader.close()

    @pytest.fixture
    def sync_lock_factory(self, lock_url: str) -> partial[Any]:
        return partial(self.server.sync_lock, lock_url)

    @pytest.fixture
    def session_killer(self, server_address: str) -> Killer:
        """Ends the session holding a name, from a second client of the server."""
        if self.server.session_killer is None:
            pytest.skip("the server holds locks in no session")
        return self.server.session_killer(server_address)

    @pytest.fixture
    def lease_dropper(self, session_killer: Killer) -> Killer:
        """A session lock's lease is its session: ending the one drops the other."""
        return session_killer


class _Locks(_Server):
    @pytest.fixture
    def lock_factory(self, lock_url: str) -> partial[Any]:
        return partial(self.server.sync_lock, lock_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[Any, str]:
        return self.server.sync_lock(self.server.unreachable_url), PASSWORD


class _AsyncLocks(_Server):
    @pytest.fixture
    def lock_factory(self, lock_url: str) -> partial[Any]:
        return partial(self.server.async_lock, lock_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[Any, str]:
        return self.server.async_lock(self.server.unreachable_url), PASSWORD


def _settings_url(settings: dict[str, str]) -> Any:
    """A `lock_url` fixture: the server's URL under each of `settings` in turn."""

    @pytest.fixture(params=sorted(settings))
    def lock_url(self: object, request: pytest.FixtureRequest, server_address: str) -> str:
        return with_setting(server_address, settings[request.param])

    return lock_url


class _Postgres(_Server):
    server = Server(
        "postgres_url",
        PgAdvisoryLock,
        AsyncPgAdvisoryLock,
        AdvisoryLockReader,
        f"postgresql://app:{PASSWORD}@127.0.0.1:1/app",
        pg_killer,  # `pg_terminate_backend`
    )

    @pytest.fixture
    def waiters_on_server(self, server_address: str) -> Iterator[Callable[[str], int]]:
        """Sessions queued for a name's advisory lock (`pg_locks`, not granted), read on a
        session of its own."""
        connection = psycopg.connect(server_address, autocommit=True)

        def count(name: str) -> int:
            key = PgAdvisoryLock.key(name) & 0xFFFF_FFFF_FFFF_FFFF  # as the server splits it
            row = connection.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND classid = %s::oid AND objid = %s::oid",
                (key >> 32, key & 0xFFFF_FFFF),
            ).fetchone()
            assert row is not None
            return int(row[0])

        yield count
        connection.close()


class _MySql(_Server):
    server = Server(
        "mysql_url",
        MySqlNamedLock,
        AsyncMySqlNamedLock,
        NamedLockReader,
        f"mysql://app:{PASSWORD}@127.0.0.1:1/app",
        mysql_killer,  # `KILL`
    )


class _Redis(_Server):
    server = Server(
        "redis_url", RedisLock, AsyncRedisLock, RedisReader, f"redis://app:{PASSWORD}@127.0.0.1:1/0"
    )

    @pytest.fixture
    def lease_dropper(self, server_address: str) -> Iterator[Callable[[str], None]]:
        """Deletes a name's lease key from a second client, as an eviction would."""
        client = redis.Redis.from_url(server_address)

        def drop(name: str) -> None:
            assert client.delete(RedisLock.key(name)) == 1, f"no lease key for {name!r}"

        yield drop
        client.close()

    @pytest.fixture
    def waiters_on_server(self, server_address: str) -> Iterator[Callable[[str], int]]:
        """Subscribers to a name's release channel (`PUBSUB NUMSUB`) and tickets in its
        waiters' queue (`ZCARD`), from a second client."""
        client = redis.Redis.from_url(server_address)

        def count(name: str) -> int:
            channel = release_channel(name, cluster=False)
            subscribers = sum(int(n) for _, n in client.pubsub_numsub(channel))
            return subscribers + int(client.zcard(queue_key(name, cluster=False)))

        yield count
        client.close()

    @pytest.fixture
    def queued_on_server(self, server_address: str) -> Iterator[Callable[[str], int]]:
        """Tickets in a name's waiters' queue (`ZCARD`), from a second client."""
        client = redis.Redis.from_url(server_address)
        yield lambda name: int(client.zcard(queue_key(name, cluster=False)))
        client.close()


class _RedisCluster(_Server):
    server = Server(
        "redis_cluster_url",
        RedisLock,
        AsyncRedisLock,
        RedisReader,
        f"redis+cluster://app:{PASSWORD}@127.0.0.1:1",
    )


class _Etcd(_Server):
    server = Server("etcd_url", EtcdLock, AsyncEtcdLock, EtcdReader, "etcd://127.0.0.1:1")

    @pytest.fixture
    def waiters_on_server(self, server_reader: EtcdReader) -> Callable[[str], int]:
        """Ticket keys under a name's queue prefix (`waiter_queue`), from a second client."""
        return lambda name: server_reader.count_prefix(etcd_queue.queue_prefix(name))


class _Memcached(_Server):
    server = Server(
        "memcached_url",
        MemcachedLock,
        AsyncMemcachedLock,
        MemcachedReader,
        "memcached://127.0.0.1:1",
    )

    @pytest.fixture
    def waiters_on_server(self, server_reader: MemcachedReader) -> Callable[[str], int]:
        """Live ticket items of a name's queue (`waiter_queue`), from a second client:
        every number the counter handed out, from the floor (or the last
        `SCAN_LIMIT`) to the last."""

        def count(name: str) -> int:
            last = server_reader.get(memcached_queue.counter_key(name).decode())
            if last is None:
                return 0
            floor = server_reader.get(memcached_queue.floor_key(name).decode())
            start = int(last) - memcached_queue.SCAN_LIMIT if floor is None else int(floor)
            numbers = range(max(start, 0), int(last) + 1)
            keys = [memcached_queue.ticket_key(name, n).decode() for n in numbers]
            return sum(server_reader.get(key) is not None for key in keys)

        return count


class TestPgAdvisoryLockContract(_Postgres, _Locks, LockContract):
    pass


class TestAsyncPgAdvisoryLockContract(_Postgres, _AsyncLocks, AsyncLockContract):
    pass


class TestPgAdvisoryLockSessionSettings(_Postgres, _Locks, HostileNamesContract):
    lock_url = _settings_url(POSTGRES_SETTINGS)


class TestAsyncPgAdvisoryLockSessionSettings(_Postgres, _AsyncLocks, AsyncHostileNamesContract):
    lock_url = _settings_url(POSTGRES_SETTINGS)


class TestPgAdvisoryLockSessionLoss(_Postgres, _Locks, SessionLossContract):
    pass


class TestAsyncPgAdvisoryLockSessionLoss(_Postgres, _AsyncLocks, AsyncSessionLossContract):
    pass


class TestMySqlNamedLockContract(_MySql, _Locks, LockContract):
    pass


class TestAsyncMySqlNamedLockContract(_MySql, _AsyncLocks, AsyncLockContract):
    pass


class TestMySqlNamedLockSessionSettings(_MySql, _Locks, HostileNamesContract):
    lock_url = _settings_url(MYSQL_SETTINGS)


class TestAsyncMySqlNamedLockSessionSettings(_MySql, _AsyncLocks, AsyncHostileNamesContract):
    lock_url = _settings_url(MYSQL_SETTINGS)


class TestMySqlNamedLockSessionLoss(_MySql, _Locks, SessionLossContract):
    pass


class TestAsyncMySqlNamedLockSessionLoss(_MySql, _AsyncLocks, AsyncSessionLossContract):
    pass


class TestRedisLockContract(_Redis, _Locks, LockContract):
    pass


class TestAsyncRedisLockContract(_Redis, _AsyncLocks, AsyncLockContract):
    pass


class TestRedisClusterLockContract(_RedisCluster, _Locks, LockContract):
    pass


class TestAsyncRedisClusterLockContract(_RedisCluster, _AsyncLocks, AsyncLockContract):
    pass


class TestEtcdLockContract(_Etcd, _Locks, LockContract):
    pass


class TestAsyncEtcdLockContract(_Etcd, _AsyncLocks, AsyncLockContract):
    pass


class TestMemcachedLockContract(_Memcached, _Locks, LockContract):
    pass


class TestAsyncMemcachedLockContract(_Memcached, _AsyncLocks, AsyncLockContract):
    pass
