"""Every anchor store on its real server: atomic add-if-absent, compare-and-set, clock, faults."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest

from firefly_scheduling import ScheduledDescriptor
from firefly_scheduling.initial_delay import (
    AnchorStore,
    AnchorStoreError,
    InitialDelayGate,
    anchor_key,
)
from firefly_scheduling_database.anchor_store import create_anchor_store as database_store
from firefly_scheduling_memcached.anchor_store import create_anchor_store as memcached_store
from firefly_scheduling_redis.anchor_store import create_anchor_store as redis_store

STORES = (
    "redis",
    "redis-cluster",
    "memcached",
    "database-sqlite",
    "database-postgres",
    "database-mariadb",
)
PASSWORD = "anchor-store-secret"


@pytest.fixture(params=STORES)
def store_factory(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    postgres_url: str,
    mysql_url: str,
    redis_url: str,
    redis_cluster_url: str,
    memcached_url: str,
) -> Callable[[], AnchorStore]:
    """A picklable zero-argument factory of independent store instances (as if on other nodes)."""
    factories: dict[str, Callable[[], AnchorStore]] = {
        "redis": partial(redis_store, redis_url),
        "redis-cluster": partial(redis_store, redis_cluster_url),
        "memcached": partial(memcached_store, memcached_url),
        "database-sqlite": partial(database_store, f"sqlite:///{tmp_path / 'anchors.db'}"),
        "database-postgres": partial(database_store, postgres_url),
        "database-mariadb": partial(database_store, mysql_url),
    }
    return factories[request.param]


@pytest.fixture
def store(store_factory: Callable[[], AnchorStore]) -> Iterator[AnchorStore]:
    instance = store_factory()
    yield instance
    instance.close()


def _key() -> str:
    return anchor_key(f"tests.anchor_stores:task_{uuid.uuid4().hex}")


def test_add_is_add_if_absent_and_get_reads_the_winner(store: AnchorStore) -> None:
    key = _key()
    assert store.get(key) is None
    assert store.add(key, "first") is True
    assert store.add(key, "second") is False
    assert store.get(key) == "first"


def test_exactly_one_of_several_instances_racing_adds_the_anchor(
    store_factory: Callable[[], AnchorStore],
) -> None:
    key = _key()
    contenders = [store_factory() for _ in range(8)]
    start = threading.Barrier(len(contenders))

    def add(index: int) -> bool:
        start.wait(timeout=30)
        return contenders[index].add(key, str(index))

    try:
        with ThreadPoolExecutor(len(contenders)) as pool:
            wins = list(pool.map(add, range(len(contenders))))
        assert wins.count(True) == 1
        assert contenders[0].get(key) == str(wins.index(True))
    finally:
        for contender in contenders:
            contender.close()


def test_replace_is_compare_and_set(store: AnchorStore) -> None:
    key = _key()
    assert store.replace(key, "absent", "new") is False
    store.add(key, "v1")
    assert store.replace(key, "stale", "v2") is False
    assert store.get(key) == "v1"
    assert store.replace(key, "v1", "v2") is True
    assert store.get(key) == "v2"


def test_keys_are_exact_and_long_keys_still_work(store: AnchorStore) -> None:
    key = _key()
    store.add(key, "lower")
    store.add(key.upper(), "upper")
    long_key = key + "x" * 400
    store.add(long_key, "long")
    assert (store.get(key), store.get(key.upper()), store.get(long_key)) == (
        "lower",
        "upper",
        "long",
    )


def test_the_clock_is_close_to_this_hosts(store: AnchorStore) -> None:
    assert abs(store.now() - time.time()) < 5


def test_two_gates_on_separate_instances_share_the_first_observation(
    store_factory: Callable[[], AnchorStore],
) -> None:
    """The second gate looks 1 s after the first anchored a 3 s window: admitted at
    3.3 s, it shares the first window (a window of its own would open at 4 s). Both
    stores are connected first, so the margins leave a loaded machine 2 s for the
    second look."""
    task = ScheduledDescriptor(
        target=f"tests.anchor_stores:task_{uuid.uuid4().hex}", fixed_rate=1.0, initial_delay=3.0
    )
    first, second = store_factory(), store_factory()
    try:
        first.now(), second.now()  # connected before the window opens
        assert InitialDelayGate(first).admit(task) is False  # anchors
        anchored = time.monotonic()  # at or after the anchor
        time.sleep(1.0)
        assert InitialDelayGate(second).admit(task) is False  # the first's window still runs
        time.sleep(max(0.0, anchored + 3.3 - time.monotonic()))
        assert InitialDelayGate(second).admit(task) is True  # the first's window, not its own
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(
    ("factory", "url"),
    [
        (redis_store, f"redis://app:{PASSWORD}@127.0.0.1:1/0"),
        (redis_store, f"redis+cluster://app:{PASSWORD}@127.0.0.1:1"),
        (database_store, f"postgresql://app:{PASSWORD}@127.0.0.1:1/test"),
        (database_store, f"mysql://app:{PASSWORD}@127.0.0.1:1/test"),
        (memcached_store, "memcached://127.0.0.1:1"),
    ],
)
def test_an_unreachable_store_raises_anchor_store_error_without_the_password(
    factory: Callable[[str], AnchorStore], url: str
) -> None:
    store = factory(url)
    try:
        with pytest.raises(AnchorStoreError) as raised:
            store.add(_key(), "value")
    finally:
        store.close()
    assert PASSWORD not in str(raised.value)
    assert "127.0.0.1:1" in str(raised.value)
