"""The `database` lock provider (entry point `firefly_scheduling.lock_providers`)."""

from __future__ import annotations

from firefly_scheduling.settings import Settings
from firefly_scheduling_database.lease_lock import DatabaseLeaseLock


def create_lock(settings: Settings) -> DatabaseLeaseLock:
    """Build the lock from `FIREFLY_SCHEDULING_LOCK_DATABASE_URL`, else `DATABASE_URL`."""
    return DatabaseLeaseLock(settings.url_for("database"))
