"""The one place the asyncio host picks its lock when the application passes none.

The configured provider (`firefly.scheduling.lock.provider` and its URL keys) is
resolved to an asyncio lock by `firefly_scheduling.aio.resolve_async_lock`, the
asyncio twin of `resolve_lock`. Hosts never choose a backend themselves; an
explicit lock always wins.
"""

from __future__ import annotations

import importlib
from typing import cast

from firefly_scheduling.aio.port import AsyncDistributedLock
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.settings import Settings


def configured_async_lock(settings: Settings) -> AsyncDistributedLock:
    """The asyncio lock of the configured provider; `ConfigurationError` if there is none."""
    # Looked up by name: `resolve_async_lock` arrives with the provider descriptors
    # (issue 9); until it does, an asyncio host needs an explicit lock.
    resolve = getattr(importlib.import_module("firefly_scheduling.aio"), "resolve_async_lock", None)
    if resolve is None:
        raise ConfigurationError(
            "the asyncio host needs an asyncio lock: pass lock=... (an AsyncDistributedLock, "
            "such as AsyncEtcdLock(url) or AsyncInMemoryLock()); this version cannot resolve "
            f"the configured provider {settings.lock_provider!r} for asyncio"
        )
    return cast(AsyncDistributedLock, resolve(settings))
