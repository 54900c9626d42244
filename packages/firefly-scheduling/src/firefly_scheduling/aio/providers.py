"""`resolve_async_lock`: the asyncio lock the configuration asks for.

The same provider key (`FIREFLY_SCHEDULING_LOCK_PROVIDER`), the same URL keys and the
same refusals as `resolve_lock`; the lock comes from the descriptor's `async_lock`.
A provider without one is refused by name rather than handed a synchronous lock,
whose blocking round trips would stall the event loop. With no provider configured,
the same once-per-process WARNING as `resolve_lock`, or the same refusal under
`FIREFLY_SCHEDULING_LOCK_REQUIRED=true`.
"""

from __future__ import annotations

from firefly_scheduling.aio.port import AsyncDistributedLock
from firefly_scheduling.locks.providers import check_plain_lock
from firefly_scheduling.providers.building import build_lock
from firefly_scheduling.settings import Settings


def resolve_async_lock(settings: Settings | None = None) -> AsyncDistributedLock:
    """Build the asyncio lock the configuration asks for, or refuse with a `ConfigurationError`."""
    settings = Settings.from_env() if settings is None else settings
    lock = configured_async_lock(settings)
    check_plain_lock(settings, lock, caller="resolve_async_lock()")
    return lock


def configured_async_lock(settings: Settings) -> AsyncDistributedLock:
    """The configured provider's asyncio lock, without the plain-lock check (the hosts' path)."""
    lock: AsyncDistributedLock = build_lock(settings, "async_lock")
    return lock
