"""firefly-scheduling-database: `DatabaseLeaseLock` and `AsyncDatabaseLeaseLock`, leases in a SQL
table (SQLAlchemy 2, and its asyncio extension)."""

from __future__ import annotations

from firefly_scheduling_database.aio_lock import AsyncDatabaseLeaseLock
from firefly_scheduling_database.lease_lock import DatabaseLeaseLock
from firefly_scheduling_database.version import __version__

__all__ = ["AsyncDatabaseLeaseLock", "DatabaseLeaseLock", "__version__"]
