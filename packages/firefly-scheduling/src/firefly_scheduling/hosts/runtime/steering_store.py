"""The control store a host steers from, or None where the configuration keeps none.

A host boots where no durable control store is configured (memcached without
`FIREFLY_SCHEDULING_CONTROL_URL`): its tasks run on their schedules. The fire
runner's pause reader (`fires.pausing.pause_reader`) says so once, for every part
of steering, so nothing is said here. Any other configuration error of the store
(an unknown scheme, a missing package) refuses the boot, as every other store's does.
"""

from __future__ import annotations

from firefly_scheduling.control.selection import (
    control_store_url,
    resolve_async_control_store,
    resolve_control_store,
)
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.control.store_async import AsyncControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.settings import Settings


def steering_store(settings: Settings) -> ControlStore | None:
    """The synchronous control store, or None (said once) where none is configured."""
    if not _configured(settings):
        return None
    return resolve_control_store(settings)


def async_steering_store(settings: Settings) -> AsyncControlStore | None:
    """The asyncio control store, or None (said once) where none is configured."""
    if not _configured(settings):
        return None
    return resolve_async_control_store(settings)


def _configured(settings: Settings) -> bool:
    try:
        control_store_url(settings)
    except ConfigurationError:
        return False  # said once by the fire runner's pause reader
    return True
