"""MySQL/MariaDB named-lock backend for firefly-scheduling (provider `mysql`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from firefly_scheduling.providers.lazy import lazy_exports
from firefly_scheduling_mysql.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_mysql.aio_named_lock import AsyncMySqlNamedLock
    from firefly_scheduling_mysql.named_lock import MySqlNamedLock

__all__ = ["AsyncMySqlNamedLock", "MySqlNamedLock", "__version__"]

# Imported on first use, so that loading the descriptor (`provider.py`) imports no driver.
__getattr__ = lazy_exports(
    __name__,
    {
        "AsyncMySqlNamedLock": "firefly_scheduling_mysql.aio_named_lock",
        "MySqlNamedLock": "firefly_scheduling_mysql.named_lock",
    },
)
