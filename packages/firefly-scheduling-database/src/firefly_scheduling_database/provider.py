"""The `database` provider's descriptor (entry point `firefly_scheduling.lock_providers`).

It keeps its own anchors, run history and control store, at the lock's SQLAlchemy URL by default,
and serves every SQL URL it accepts, including the `postgres` and `mysql` providers'
(`url.DRIVERS` maps the bare schemes to the drivers this package is tested with).
"""

from __future__ import annotations

from firefly_scheduling.providers import LockProvider

#: What the asyncio lock needs beyond the synchronous one: SQLAlchemy's asyncio
#: extension (greenlet) and the async driver of the database (aiosqlite for SQLite;
#: psycopg's own for PostgreSQL; asyncmy for MySQL).
ASYNC_INSTALL = (
    "pip install 'firefly-scheduling[database-asyncio]' (firefly-scheduling-database[asyncio] "
    "and aiosqlite; add asyncmy for MySQL)"
)

PROVIDER = LockProvider(
    name="database",
    lock="firefly_scheduling_database.lock:DatabaseLeaseLock",
    async_lock="firefly_scheduling_database.lock_async:AsyncDatabaseLeaseLock",
    url_fallbacks=("DATABASE_URL",),
    anchor_store="firefly_scheduling_database.anchor_store:create_anchor_store",
    history_store="firefly_scheduling_database.sql_history.store:create_history_store",
    control_store="firefly_scheduling_database.control_store:create_control_store",
    async_control_store="firefly_scheduling_database.control_store_async:create_control_store",
    # The base schemes of url.DRIVERS, written out: this module imports no driver.
    store_schemes=("sqlite", "postgresql", "postgres", "mysql", "mariadb"),
    stores_at_lock_url=("anchor_store", "history_store", "control_store"),
    local_file_url="sqlite:///{path}",
    extra="firefly-scheduling[database]",
    async_install=ASYNC_INSTALL,
    url_example="sqlite:///path/to/locks.db or postgresql://user:password@host:5432/dbname",
)
