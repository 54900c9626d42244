"""`resolve_async_lock`: the same keys and refusals as `resolve_lock`, in the asyncio flavour."""

from __future__ import annotations

import asyncio
import sys
import types
from importlib.metadata import EntryPoint

import pytest

from firefly_scheduling import ConfigurationError, Settings
from firefly_scheduling.aio import AsyncInMemoryLock, AsyncNoneLock, resolve_async_lock
from firefly_scheduling.locks import InMemoryLock, NoneLock
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling.providers import LockProvider, registry
from firefly_scheduling.providers.registry import installed_providers


def _env(provider: str, **more: str) -> Settings:
    return Settings.from_env({"FIREFLY_SCHEDULING_LOCK_PROVIDER": provider, **more})


def test_none_is_the_default_in_both_flavours() -> None:
    assert isinstance(resolve_async_lock(Settings.from_env({})), AsyncNoneLock)
    assert isinstance(resolve_lock(Settings.from_env({})), NoneLock)


def test_memory_gives_the_async_memory_lock_which_excludes_the_sync_one() -> None:
    lock = resolve_async_lock(_env("MEMORY"))
    assert isinstance(lock, AsyncInMemoryLock)
    sync = resolve_lock(_env("memory"))
    assert isinstance(sync, InMemoryLock)
    name = "resolve-async-lock-exclusion"

    async def scenario() -> None:
        assert await lock.try_acquire(name, 5)
        assert not sync.try_acquire(name, 5)
        await lock.release(name)
        assert sync.try_acquire(name, 5)
        sync.release(name)
        await lock.aclose()

    asyncio.run(scenario())


def test_the_async_none_lock_still_validates_names() -> None:
    with pytest.raises(ValueError, match="name"):
        asyncio.run(resolve_async_lock(Settings()).try_acquire("", 1))


def test_an_unknown_provider_is_refused_as_resolve_lock_refuses_it() -> None:
    settings = _env("nosuch")
    with pytest.raises(ConfigurationError) as async_refusal:
        resolve_async_lock(settings)
    with pytest.raises(ConfigurationError) as sync_refusal:
        resolve_lock(settings)
    assert str(async_refusal.value) == str(sync_refusal.value)
    assert "unknown lock provider 'nosuch'" in str(async_refusal.value)
    assert "FIREFLY_SCHEDULING_LOCK_PROVIDER='nosuch'" in str(async_refusal.value)


#: A third-party-style provider with a synchronous lock only (every first-party one has
#: both flavours now), registered below through a real entry point.
SYNC_ONLY = LockProvider(
    name="synconly", lock="firefly_scheduling.locks.memory:InMemoryLock", takes_url=False
)


def test_a_provider_without_an_async_lock_is_refused_by_name_never_given_the_sync_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = registry.registered_providers()
    module = types.ModuleType("firefly_sync_only_provider")
    module.PROVIDER = SYNC_ONLY  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    extra = EntryPoint("synconly", f"{module.__name__}:PROVIDER", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "registered_providers", lambda: {**real, "synconly": extra})
    without = [p for p in installed_providers() if p.async_lock is None]
    assert [p.name for p in without] == ["synconly"]
    provider = without[0]
    assert isinstance(resolve_lock(_env(provider.name)), InMemoryLock)  # the sync one works
    with pytest.raises(ConfigurationError) as caught:
        resolve_async_lock(_env(provider.name))
    message = str(caught.value)
    assert f"the {provider.name!r} lock provider" in message
    assert "has no asyncio lock" in message
    assert "memory" in message  # the providers that have one are listed


def test_the_url_keys_are_the_same_as_resolve_lock() -> None:
    # etcd is the adapter with an asyncio lock today; building one does not connect.
    settings = _env("etcd", FIREFLY_SCHEDULING_LOCK_ETCD_URL="etcd://db.example:2400")
    async_lock, sync_lock = resolve_async_lock(settings), resolve_lock(settings)
    assert repr(async_lock).removeprefix("Async") == repr(sync_lock)
    assert "db.example:2400" in repr(sync_lock)
