"""The `mysql` provider's descriptor (entry point `firefly_scheduling.lock_providers`).

Its anchors, run history and control store default to its own server, kept by the `database`
provider's stores (the `[mysql]` extra installs them): they accept its URL as is.
"""

from __future__ import annotations

from firefly_scheduling.providers import LockProvider

PROVIDER = LockProvider(
    name="mysql",
    lock="firefly_scheduling_mysql.lock:MySqlNamedLock",
    async_lock="firefly_scheduling_mysql.lock_async:AsyncMySqlNamedLock",
    url_fallbacks=("DATABASE_URL",),
    stores_at_lock_url=("anchor_store", "history_store", "control_store"),
    extra="firefly-scheduling[mysql]",
    url_example="mysql://user:password@host:3306/dbname",
)
