"""The control store a host steers from, or None where the configuration keeps none.

A host boots where no durable control store is configured (memcached without
`FIREFLY_SCHEDULING_CONTROL_URL`): its tasks run on their schedules, and it says
once, at WARNING, that pauses, triggers and backfills asked of the fleet are not
seen on this node, and why. Any other configuration error of the store (an unknown
scheme, a missing package) refuses the boot, as every other store's does.
"""

from __future__ import annotations

import logging

from firefly_scheduling.control.selection import (
    control_store_url,
    resolve_async_control_store,
    resolve_control_store,
)
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.control.store_async import AsyncControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.settings import Settings

logger = logging.getLogger("firefly_scheduling.hosts")


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
    except ConfigurationError as err:
        logger.warning(
            "steering needs a durable control store: triggers and backfills asked of the "
            "fleet are not run on this node (%s)",
            err,
        )
        return False
    return True
