"""The `postgres` provider's descriptor (entry point `firefly_scheduling.lock_providers`).

Its anchors, run history and control store default to its own server, kept by the `database`
provider's stores (the `[postgres]` extra installs them): they accept its URL as is.
"""

from __future__ import annotations

from firefly_scheduling.providers import LockProvider

PROVIDER = LockProvider(
    name="postgres",
    lock="firefly_scheduling_postgres.lock:PgAdvisoryLock",
    async_lock="firefly_scheduling_postgres.lock_async:AsyncPgAdvisoryLock",
    url_fallbacks=("DATABASE_URL",),
    stores_at_lock_url=("anchor_store", "history_store", "control_store"),
    extra="firefly-scheduling[postgres]",
    # Its lock also reads libpq key=value strings; its stores need this form.
    url_example="postgresql://user:password@host:5432/dbname",
)
