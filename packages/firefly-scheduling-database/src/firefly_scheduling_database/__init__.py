"""firefly-scheduling-database: `DatabaseLeaseLock`, leases in a SQL table (SQLAlchemy 2)."""

from __future__ import annotations

from firefly_scheduling_database.lease_lock import DatabaseLeaseLock

__all__ = ["DatabaseLeaseLock"]
