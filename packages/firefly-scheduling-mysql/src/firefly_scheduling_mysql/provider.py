"""Entry point of the `mysql` lock provider (group `firefly_scheduling.lock_providers`)."""

from __future__ import annotations

from firefly_scheduling.settings import Settings
from firefly_scheduling_mysql.named_lock import MySqlNamedLock


def create_lock(settings: Settings) -> MySqlNamedLock:
    """Build the lock from `firefly.scheduling.lock.mysql.url`, else `DATABASE_URL`."""
    return MySqlNamedLock(settings.url_for("mysql"))
