"""The one place the asyncio host picks its lock when the application passes none.

The configured provider (`firefly.scheduling.lock.provider` and its URL keys) is
resolved to an asyncio lock by `firefly_scheduling.aio.resolve_async_lock`, the
asyncio twin of `resolve_lock`, which refuses a provider without an asyncio lock by
name (without its plain-lock warning: the host's boot line says the same, naming
the tasks). Hosts never choose a backend themselves; an explicit lock always wins.
"""

from __future__ import annotations

from firefly_scheduling.locks.port import AsyncDistributedLock
from firefly_scheduling.locks.providers import configured_async_lock as _configured
from firefly_scheduling.settings import Settings


def configured_async_lock(settings: Settings) -> AsyncDistributedLock:
    """The asyncio lock of the configured provider; `ConfigurationError` if there is none."""
    return _configured(settings)
