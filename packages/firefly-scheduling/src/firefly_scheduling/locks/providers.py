"""`resolve_lock`: the lock the configuration asks for, built from its provider's descriptor.

Every provider, core's `none` and `memory` included, is a `LockProvider` registered
under the entry-point group `firefly_scheduling.lock_providers`; see
`firefly_scheduling.providers`. Core never imports an adapter by name.

Application code that takes a plain lock (`hold(resolve_lock(), ...)`) gets the
default provider, `none`, when nothing is configured: a lock that grants every
caller, nested calls included. That is right for a test or one process and silently
wrong on a fleet, so it draws a WARNING once per process; under
`firefly.scheduling.lock.required` a lock that excludes nothing across processes
(`none`, `memory`) is refused instead. The hosts build their lock without this
check: they say the same at boot, naming the tasks (`hosts.runtime.lock_safety`).

`resolve_async_lock` is its asyncio counterpart: the same keys and refusals, the lock
from the descriptor's `async_lock`; a provider without one is refused by name rather
than handed a synchronous lock whose blocking round trips would stall the loop.
"""

from __future__ import annotations

import logging
import threading

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.port import AsyncDistributedLock, DistributedLock, capabilities_of
from firefly_scheduling.providers.building import build_lock
from firefly_scheduling.providers.registry import ENTRY_POINT_GROUP, registered_providers
from firefly_scheduling.settings import Settings, env_var

__all__ = ["ENTRY_POINT_GROUP", "configured_lock", "registered_providers", "resolve_lock"]

logger = logging.getLogger("firefly_scheduling.locks")

_PROVIDER_KEY = "firefly.scheduling.lock.provider"
_REQUIRED_KEY = "firefly.scheduling.lock.required"
#: Set once the no-provider warning was logged: it is logged once per process.
_warned_no_provider = threading.Event()
_warning_mutex = threading.Lock()


def resolve_lock(settings: Settings | None = None) -> DistributedLock:
    """Build the lock the configuration asks for, or refuse with a `ConfigurationError`.

    There is no silent fallback: an unknown or broken provider is an error, because
    quietly running without exclusion is exactly what this library exists to prevent.
    With no provider configured the `none` lock is returned with a WARNING (once per
    process), or refused under `FIREFLY_SCHEDULING_LOCK_REQUIRED=true`.
    """
    settings = Settings.from_env() if settings is None else settings
    lock = configured_lock(settings)
    check_plain_lock(settings, lock, caller="resolve_lock()")
    return lock


def configured_lock(settings: Settings) -> DistributedLock:
    """The configured provider's lock, without the plain-lock check (the hosts' own path)."""
    lock: DistributedLock = build_lock(settings, "lock")
    return lock


def check_plain_lock(settings: Settings, lock: object, *, caller: str) -> None:
    """Warn once about a lock that grants every caller, or refuse it when one is required."""
    if capabilities_of(lock).cross_process and settings.lock_provider != "none":
        return
    required = env_var(_REQUIRED_KEY)
    provider = env_var(_PROVIDER_KEY)
    if settings.lock_required:
        raise ConfigurationError(
            f"{caller}: the {settings.lock_provider!r} lock provider excludes nothing across "
            f"processes, and {required}=true ({_REQUIRED_KEY}) requires a lock that does: "
            f"set {provider} to a provider whose server the fleet shares"
        )
    if settings.lock_provider != "none":
        return  # `memory`, chosen by name: a one-process lock on purpose
    with _warning_mutex:
        if _warned_no_provider.is_set():
            return
        _warned_no_provider.set()
    logger.warning(
        "%s: no lock provider is configured (%s is unset or 'none'), so the lock grants "
        "every caller, on every node and nested alike: nothing is excluded. Set %s to a "
        "shared provider, or %s=true to refuse to run like this",
        caller,
        provider,
        provider,
        required,
    )


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
