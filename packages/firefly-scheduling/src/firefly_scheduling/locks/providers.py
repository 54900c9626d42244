"""Provider discovery: pick the configured backend through entry points.

Core registers `none` and `memory` under the same entry-point group as the adapter
distributions, so a built-in backend and a third-party one are found the same way.
Core never imports an adapter by name.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.memory import InMemoryLock
from firefly_scheduling.locks.none import NoneLock
from firefly_scheduling.locks.port import DistributedLock
from firefly_scheduling.settings import Settings, env_var

ENTRY_POINT_GROUP = "firefly_scheduling.lock_providers"

#: First-party adapters: provider name -> the extra that installs it.
KNOWN_ADAPTERS: dict[str, str] = {
    "postgres": "firefly-scheduling[postgres]",
    "database": "firefly-scheduling[database]",
    "mysql": "firefly-scheduling[mysql]",
    "redis": "firefly-scheduling[redis]",
    "memcached": "firefly-scheduling[memcached]",
}

LockFactory = Callable[[Settings], DistributedLock]


def none_provider(settings: Settings) -> DistributedLock:
    """Factory of the `none` provider: no exclusion at all."""
    return NoneLock()


def memory_provider(settings: Settings) -> DistributedLock:
    """Factory of the `memory` provider: exclusion within this process only."""
    return InMemoryLock()


def installed_providers() -> dict[str, EntryPoint]:
    """Every provider registered in this environment, by name."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def resolve_lock(settings: Settings | None = None) -> DistributedLock:
    """Build the lock the configuration asks for, or refuse with a `ConfigurationError`.

    There is no silent fallback: an unknown or broken provider is an error, because
    quietly running without exclusion is exactly what this library exists to prevent.
    """
    settings = Settings.from_env() if settings is None else settings
    name = settings.lock_provider.strip().lower()
    source = f"{env_var('firefly.scheduling.lock.provider')}={settings.lock_provider!r}"
    providers = installed_providers()
    entry_point = providers.get(name)
    if entry_point is None:
        raise ConfigurationError(_unknown_provider_message(name, source, sorted(providers)))
    try:
        factory: LockFactory = entry_point.load()
    except ImportError as err:
        hint = KNOWN_ADAPTERS.get(name)
        reinstall = f"; reinstall it with: pip install '{hint}'" if hint else ""
        raise ConfigurationError(
            f"lock provider {name!r} ({source}) is registered by {entry_point.value!r} but "
            f"cannot be imported: {err}{reinstall}"
        ) from err
    return factory(settings)


def _unknown_provider_message(name: str, source: str, installed: list[str]) -> str:
    message = (
        f"unknown lock provider {name!r} ({source}); installed providers: {', '.join(installed)}"
    )
    if name in KNOWN_ADAPTERS:
        message += f". Install it with: pip install '{KNOWN_ADAPTERS[name]}'"
    else:
        message += f". First-party providers: none, memory, {', '.join(KNOWN_ADAPTERS)}"
    return message
