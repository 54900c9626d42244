"""`resolve_lock`: the lock the configuration asks for, built from its provider's descriptor.

Every provider, core's `none` and `memory` included, is a `LockProvider` registered
under the entry-point group `firefly_scheduling.lock_providers`; see
`firefly_scheduling.providers`. Core never imports an adapter by name.
"""

from __future__ import annotations

from firefly_scheduling.locks.port import DistributedLock
from firefly_scheduling.providers.building import build_lock
from firefly_scheduling.providers.registry import ENTRY_POINT_GROUP, registered_providers
from firefly_scheduling.settings import Settings

__all__ = ["ENTRY_POINT_GROUP", "registered_providers", "resolve_lock"]


def resolve_lock(settings: Settings | None = None) -> DistributedLock:
    """Build the lock the configuration asks for, or refuse with a `ConfigurationError`.

    There is no silent fallback: an unknown or broken provider is an error, because
    quietly running without exclusion is exactly what this library exists to prevent.
    """
    lock: DistributedLock = build_lock(
        Settings.from_env() if settings is None else settings, "lock"
    )
    return lock
