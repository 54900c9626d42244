"""Every control store against the shared contract, in both flavours, on its real server.

SQLite, PostgreSQL and MariaDB (through SQLAlchemy), Redis, a Redis Cluster, etcd,
and process memory. Each case gets a namespace no other case uses (a table, a key
prefix), removed after it, and a neighbour namespace on the same server, so reruns
are independent and the isolation case has something to leak into.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from firefly_scheduling.control.memory import MemoryControlStore
from firefly_scheduling.control.memory_async import AsyncMemoryControlStore
from firefly_scheduling.testing import AsyncControlStoreContract, ControlStoreContract
from firefly_scheduling_database.control_store import DatabaseControlStore
from firefly_scheduling_database.control_store_async import AsyncDatabaseControlStore
from firefly_scheduling_database.engine import lock_engine
from firefly_scheduling_etcd.control_store import EtcdControlStore
from firefly_scheduling_etcd.control_store_async import AsyncEtcdControlStore
from firefly_scheduling_redis.control_store import RedisControlStore
from firefly_scheduling_redis.control_store_async import AsyncRedisControlStore

PASSWORD = "control-contract-secret"


@dataclass(frozen=True)
class Backend:
    """One server's stores: how a namespace is named, built, and removed."""

    url_fixture: str
    sync_store: Callable[..., Any]
    async_store: Callable[..., Any]
    #: The keyword the store takes its namespace by (`table`, `prefix`, or None: the URL).
    namespace_keyword: str | None
    #: Makes a fresh namespace name.
    fresh: Callable[[], str]
    #: Removes namespace `name` on the server at `url` after the case.
    remove: Callable[[str, str], None]
    #: A URL on a closed port, carrying PASSWORD where the URL can.
    unreachable_url: str | None


def _drop_table(url: str, name: str) -> None:
    engine = lock_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(f"DROP TABLE IF EXISTS {name}"))  # a fresh identifier
    finally:
        engine.dispose()


def _delete_redis_prefix(url: str, prefix: str) -> None:
    cluster = url.startswith("redis+cluster://")
    plain = url.replace("redis+cluster://", "redis://")
    client: Any = (
        redis.cluster.RedisCluster.from_url(plain) if cluster else redis.Redis.from_url(plain)
    )
    try:
        for kind in ("pause", "trigger", "backfill", "schedule"):
            client.delete(f"{{{prefix}}}:control:{kind}")
    finally:
        client.close()


def _delete_etcd_prefix(url: str, prefix: str) -> None:
    store = EtcdControlStore(url, prefix=prefix)
    try:
        for kind in ("pause", "trigger", "backfill", "schedule"):
            store._post(
                "kv/deleterange",
                {
                    "key": _b64(store.kind_prefix(kind)),
                    "range_end": _b64(store.kind_prefix(kind)[:-1] + b"0"),
                },
            )
    finally:
        store.close()


def _b64(data: bytes) -> str:
    import base64  # noqa: PLC0415 - cleanup only

    return base64.b64encode(data).decode()


def _nothing(url: str, name: str) -> None:
    """Process memory goes with the process."""


def _table() -> str:
    return f"control_{uuid.uuid4().hex[:12]}"


def _prefix(separator: str) -> Callable[[], str]:
    return lambda: f"h7{separator}control{separator}{uuid.uuid4().hex[:12]}"


SQL = {"sync_store": DatabaseControlStore, "async_store": AsyncDatabaseControlStore}
BACKENDS: dict[str, Backend] = {
    "sqlite": Backend(
        "sqlite_url",
        **SQL,
        namespace_keyword="table",
        fresh=_table,
        remove=_drop_table,
        unreachable_url=None,
    ),
    "postgres": Backend(
        "postgres_url",
        **SQL,
        namespace_keyword="table",
        fresh=_table,
        remove=_drop_table,
        unreachable_url=f"postgresql://postgres:{PASSWORD}@127.0.0.1:9/x",
    ),
    "mariadb": Backend(
        "mysql_url",
        **SQL,
        namespace_keyword="table",
        fresh=_table,
        remove=_drop_table,
        unreachable_url=f"mysql://root:{PASSWORD}@127.0.0.1:9/x",
    ),
    "redis": Backend(
        "redis_url",
        RedisControlStore,
        AsyncRedisControlStore,
        "prefix",
        _prefix(":"),
        _delete_redis_prefix,
        f"redis://:{PASSWORD}@127.0.0.1:9/0",
    ),
    "redis-cluster": Backend(
        "redis_cluster_url",
        RedisControlStore,
        AsyncRedisControlStore,
        "prefix",
        _prefix(":"),
        _delete_redis_prefix,
        f"redis+cluster://:{PASSWORD}@127.0.0.1:9",
    ),
    "etcd": Backend(
        "etcd_url",
        EtcdControlStore,
        AsyncEtcdControlStore,
        "prefix",
        _prefix("/"),
        _delete_etcd_prefix,
        "etcd://127.0.0.1:9",
    ),
    "memory": Backend(
        "memory_url",
        MemoryControlStore,
        AsyncMemoryControlStore,
        None,
        _prefix("-"),
        _nothing,
        None,
    ),
}


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'control.db'}"


@pytest.fixture
def memory_url() -> str:
    return "memory://"


class _Namespaces:
    """A backend's fixtures; a subclass names the backend and the flavour."""

    backend: Backend
    asynchronous: bool

    @pytest.fixture
    def server_url(self, request: pytest.FixtureRequest) -> str:
        url: str = request.getfixturevalue(self.backend.url_fixture)
        return url

    def _factory(self, url: str, namespace: str) -> Callable[[], Any]:
        store = self.backend.async_store if self.asynchronous else self.backend.sync_store
        keyword = self.backend.namespace_keyword
        if keyword is None:
            return partial(store, url + namespace)
        return partial(store, url, **{keyword: namespace})

    @pytest.fixture
    def control_store_factory(self, server_url: str) -> Iterator[Callable[[], Any]]:
        namespace = self.backend.fresh()
        yield self._factory(server_url, namespace)
        self.backend.remove(server_url, namespace)

    @pytest.fixture
    def neighbour_store_factory(self, server_url: str) -> Iterator[Callable[[], Any]]:
        namespace = self.backend.fresh()
        yield self._factory(server_url, namespace)
        self.backend.remove(server_url, namespace)

    @pytest.fixture
    def unreachable_control_store(self) -> tuple[Any, str | None]:
        url = self.backend.unreachable_url
        if url is None:
            pytest.skip("no server to be unreachable (file or process memory)")
        store = self.backend.async_store if self.asynchronous else self.backend.sync_store
        return store(url), (PASSWORD if PASSWORD in url else None)


def _contract_classes() -> dict[str, type]:
    made: dict[str, type] = {}
    for name, backend in BACKENDS.items():
        title = "".join(part.title() for part in name.split("-"))
        for asynchronous, contract in (
            (False, ControlStoreContract),
            (True, AsyncControlStoreContract),
        ):
            class_name = f"Test{'Async' if asynchronous else ''}{title}ControlStore"
            made[class_name] = type(
                class_name,
                (contract, _Namespaces),
                {"backend": backend, "asynchronous": asynchronous},
            )
    return made


globals().update(_contract_classes())


@pytest.mark.parametrize("backend_name", [name for name in BACKENDS if name != "memory"])
def test_the_two_flavours_read_each_others_records(
    backend_name: str, request: pytest.FixtureRequest
) -> None:
    """A sync node and an async node of one fleet share one store: same keys, same records."""
    backend = BACKENDS[backend_name]
    url: str = request.getfixturevalue(backend.url_fixture)
    namespace = backend.fresh()
    keyword = {} if backend.namespace_keyword is None else {backend.namespace_keyword: namespace}
    task = f"app.flavours_{uuid.uuid4().hex}:job"
    sync_store = backend.sync_store(url, **keyword)
    try:
        paused = sync_store.pause(task, by="sync-node", note="from sync")
        trigger = sync_store.request_trigger(task, by="sync-node")

        async def from_async() -> tuple[Any, Any, Any]:
            store = backend.async_store(url, **keyword)
            try:
                seen = await store.pause_of(task)
                taken = await store.take_trigger(task)
                await store.pause_all(by="async-node")
                return seen, taken, await store.take_trigger(task)
            finally:
                await store.aclose()

        seen, taken, again = asyncio.run(from_async())
        assert seen == paused
        assert taken == trigger
        assert again is None
        assert [pause.by for pause in sync_store.pauses()] == ["async-node", "sync-node"]
        assert sync_store.triggers(task) == []
    finally:
        sync_store.close()
        backend.remove(url, namespace)
