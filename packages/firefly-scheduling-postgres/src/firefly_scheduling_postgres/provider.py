"""Entry point of the `postgres` lock provider (group `firefly_scheduling.lock_providers`)."""

from __future__ import annotations

from firefly_scheduling.settings import Settings
from firefly_scheduling_postgres.advisory_lock import PgAdvisoryLock


def create_lock(settings: Settings) -> PgAdvisoryLock:
    """Build the lock from `firefly.scheduling.lock.postgres.url`, else `DATABASE_URL`."""
    return PgAdvisoryLock(settings.url_for("postgres"))
