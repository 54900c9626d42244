"""firefly-scheduling-database: `DatabaseLeaseLock` and `AsyncDatabaseLeaseLock`, leases in a SQL
table (SQLAlchemy 2, and its asyncio extension).

`AsyncDatabaseLeaseLock` is imported on first use, like every export: SQLAlchemy's
asyncio extension needs greenlet and an async driver (the core's `[database-asyncio]`
extra), which the synchronous lock, the anchor store and the run history do without.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from firefly_scheduling.providers.lazy import lock_exports
from firefly_scheduling_database.provider import ASYNC_INSTALL, PROVIDER
from firefly_scheduling_database.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_database.lock import DatabaseLeaseLock
    from firefly_scheduling_database.lock_async import AsyncDatabaseLeaseLock

__all__ = ["AsyncDatabaseLeaseLock", "DatabaseLeaseLock", "__version__"]

# The lock classes the descriptor names, imported on first use: loading the descriptor
# (`provider.py`) imports no driver.
__getattr__ = lock_exports(
    __name__,
    PROVIDER,
    install_hints={"AsyncDatabaseLeaseLock": f"SQLAlchemy's asyncio extension: {ASYNC_INSTALL}"},
)
