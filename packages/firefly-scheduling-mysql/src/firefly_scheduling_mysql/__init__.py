"""MySQL/MariaDB named-lock backend for firefly-scheduling (provider `mysql`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from firefly_scheduling.providers.lazy import lock_exports
from firefly_scheduling_mysql.provider import PROVIDER
from firefly_scheduling_mysql.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_mysql.lock import MySqlNamedLock
    from firefly_scheduling_mysql.lock_async import AsyncMySqlNamedLock

__all__ = ["AsyncMySqlNamedLock", "MySqlNamedLock", "__version__"]

# The lock classes the descriptor names, imported on first use: loading the descriptor
# (`provider.py`) imports no driver.
__getattr__ = lock_exports(__name__, PROVIDER)
