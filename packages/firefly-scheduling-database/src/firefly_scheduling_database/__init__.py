"""firefly-scheduling-database: `DatabaseLeaseLock`, leases in a SQL table (SQLAlchemy 2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from firefly_scheduling.providers.lazy import lazy_exports
from firefly_scheduling_database.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_database.lease_lock import DatabaseLeaseLock

__all__ = ["DatabaseLeaseLock", "__version__"]

# Imported on first use, so that loading the descriptor (`provider.py`) imports no driver.
__getattr__ = lazy_exports(
    __name__,
    {
        "DatabaseLeaseLock": "firefly_scheduling_database.lease_lock",
    },
)
