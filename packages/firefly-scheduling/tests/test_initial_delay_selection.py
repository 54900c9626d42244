"""Choosing the anchor store: the explicit URL, else the lock backend's own store."""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError, Settings
from firefly_scheduling.initial_delay import (
    MemoryAnchorStore,
    anchor_store_url,
    resolve_anchor_store,
)
from firefly_scheduling.providers.registry import providers_with


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (Settings(), "memory://"),
        (Settings(lock_provider="memory"), "memory://"),
        (
            Settings(lock_provider="redis", lock_urls={"redis": "redis://cache:6379/2"}),
            "redis://cache:6379/2",
        ),
        (Settings(lock_provider="memcached"), "memcached://127.0.0.1:11211"),
        (
            Settings(lock_provider="database", lock_urls={"database": "sqlite:///a.db"}),
            "sqlite:///a.db",
        ),
        (
            Settings(lock_provider="postgres", lock_urls={"postgres": "postgresql://db/app"}),
            "postgresql://db/app",
        ),
        (Settings(lock_provider="mysql", lock_urls={"mysql": "mysql://db/app"}), "mysql://db/app"),
        (Settings(lock_provider="etcd"), "memory://"),
        (Settings(lock_provider="third-party"), "memory://"),
        (Settings(lock_provider="redis", initial_delay_store="memory://"), "memory://"),
        (Settings(initial_delay_store=" redis://other/0 "), "redis://other/0"),
    ],
)
def test_the_store_url_in_effect(settings: Settings, expected: str) -> None:
    assert anchor_store_url(settings) == expected


def test_a_lock_provider_without_its_url_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="DATABASE_URL"):
        anchor_store_url(Settings(lock_provider="postgres"))


def test_memory_is_built_in() -> None:
    store = resolve_anchor_store(Settings())
    assert isinstance(store, MemoryAnchorStore)
    assert store.shared_across_processes is False


def test_the_adapters_declare_their_stores_in_their_descriptors() -> None:
    declared = {provider.name for provider in providers_with("anchor_store")}
    assert {"redis", "memcached", "database", "memory"} <= declared


@pytest.mark.parametrize(
    ("url", "store_class"),
    [
        ("redis://127.0.0.1:6379/0", "RedisAnchorStore"),
        ("memcached://127.0.0.1:11211", "MemcachedAnchorStore"),
        ("sqlite:///anchors.db", "DatabaseAnchorStore"),
        ("postgresql+psycopg://u@127.0.0.1/db", "DatabaseAnchorStore"),
        ("mysql://u@127.0.0.1/db", "DatabaseAnchorStore"),
    ],
)
def test_a_url_selects_its_store_without_connecting(url: str, store_class: str) -> None:
    store = resolve_anchor_store(Settings(initial_delay_store=url))
    try:
        assert type(store).__name__ == store_class
        assert store.shared_across_processes is True
    finally:
        store.close()


def test_an_unknown_scheme_is_refused_listing_the_stores_without_the_password() -> None:
    with pytest.raises(ConfigurationError) as raised:
        resolve_anchor_store(Settings(initial_delay_store="etcd://user:hunter2@host:2379"))
    message = str(raised.value)
    assert "'etcd'" in message
    assert "memory://" in message
    assert "redis://" in message
    assert "hunter2" not in message
