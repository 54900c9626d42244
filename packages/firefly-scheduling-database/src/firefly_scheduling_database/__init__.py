"""firefly-scheduling-database: `DatabaseLeaseLock`, leases in a SQL table (SQLAlchemy 2)."""

from __future__ import annotations

from firefly_scheduling_database.lease_lock import DatabaseLeaseLock
from firefly_scheduling_database.version import __version__

__all__ = ["DatabaseLeaseLock", "__version__"]
