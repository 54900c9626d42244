"""`pool_size`: the bound on the HTTP connections of an etcd lock."""

from __future__ import annotations

import pytest

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_etcd import AsyncEtcdLock, EtcdLock


@pytest.mark.parametrize("kind", [EtcdLock, AsyncEtcdLock])
def test_the_default_is_four_connections(kind: type) -> None:
    lock = kind("etcd://127.0.0.1:2379")
    assert lock.pool_size == 4
    assert len(lock._connections) == 4
    assert kind("etcd://127.0.0.1:2379?pool_size=2").pool_size == 2
    assert kind("etcd://127.0.0.1:2379", pool_size=6).pool_size == 6


@pytest.mark.parametrize("value", ["0", "many", "2.5"])
def test_a_bad_pool_size_in_the_url_is_refused_naming_it(value: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        EtcdLock(f"etcd://127.0.0.1:2379?pool_size={value}")
    assert f"got {value!r}" in str(raised.value)
    assert "pool_size= of the etcd URL etcd://127.0.0.1:2379" in str(raised.value)


def test_the_argument_and_the_url_must_agree() -> None:
    with pytest.raises(ConfigurationError, match="give one of them"):
        EtcdLock("etcd://127.0.0.1:2379?pool_size=3", pool_size=4)
    with pytest.raises(ConfigurationError, match="the etcd lock's pool_size argument"):
        EtcdLock("etcd://127.0.0.1:2379", pool_size=0)
