"""`lock_exports`: an adapter exports the lock classes its descriptor names, lazily."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from firefly_scheduling.providers import LockProvider
from firefly_scheduling.providers.lazy import lock_exports

PACKAGE = "firefly_lock_exports_probe"


@pytest.fixture
def package() -> Iterator[types.ModuleType]:
    module = types.ModuleType(PACKAGE)
    sys.modules[PACKAGE] = module
    yield module
    del sys.modules[PACKAGE]


def test_the_descriptors_lock_classes_are_exported_on_first_access(
    package: types.ModuleType,
) -> None:
    provider = LockProvider(
        name="probe",
        lock="firefly_scheduling.locks.memory:InMemoryLock",
        async_lock="firefly_scheduling.locks.memory_async:AsyncInMemoryLock",
    )
    getattr_ = lock_exports(PACKAGE, provider)
    from firefly_scheduling.locks.memory import InMemoryLock  # noqa: PLC0415
    from firefly_scheduling.locks.memory_async import AsyncInMemoryLock  # noqa: PLC0415

    assert getattr_("InMemoryLock") is InMemoryLock
    assert getattr_("AsyncInMemoryLock") is AsyncInMemoryLock
    assert package.InMemoryLock is InMemoryLock  # cached: the next access is a lookup
    with pytest.raises(AttributeError, match="has no attribute 'PgLock'"):
        getattr_("PgLock")


def test_a_sync_only_provider_exports_its_one_lock(package: types.ModuleType) -> None:
    provider = LockProvider(name="probe", lock="firefly_scheduling.locks.memory:InMemoryLock")
    getattr_ = lock_exports(PACKAGE, provider)
    with pytest.raises(AttributeError):
        getattr_("AsyncInMemoryLock")


def test_a_callable_factory_cannot_be_exported_by_name() -> None:
    provider = LockProvider(name="probe", lock=lambda url: None)
    with pytest.raises(TypeError, match=r"'probe' provider's lock factory .* lazy_exports"):
        lock_exports(PACKAGE, provider)
