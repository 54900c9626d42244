"""`RedisControlStore`'s keys: one slot per prefix, apart from other prefixes; bad prefixes."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from firefly_scheduling.control.records import KINDS
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_redis.control_store import RedisControlStore
from firefly_scheduling_redis.control_store_async import AsyncRedisControlStore


@pytest.mark.parametrize("store_class", [RedisControlStore, AsyncRedisControlStore])
def test_every_kind_of_one_prefix_is_in_one_cluster_slot(store_class: type) -> None:
    store = store_class("redis+cluster://127.0.0.1:1", prefix="deploy:a")
    slots = {key_slot(store.hash_key(kind).encode()) for kind in KINDS}
    assert len(slots) == 1
    keys = {store.hash_key(kind) for kind in KINDS}
    other = store_class("redis+cluster://127.0.0.1:1", prefix="deploy:b")
    assert keys.isdisjoint(other.hash_key(kind) for kind in KINDS)


@pytest.mark.parametrize("prefix", ["", "a{b", "a}b"])
def test_a_prefix_that_cannot_be_a_hash_tag_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigurationError, match="prefix"):
        RedisControlStore("redis://127.0.0.1:1/0", prefix=prefix)
