"""firefly-scheduling-database: `DatabaseLeaseLock` and `AsyncDatabaseLeaseLock`, leases in a SQL
table (SQLAlchemy 2, and its asyncio extension).

`AsyncDatabaseLeaseLock` is imported on first use: SQLAlchemy's asyncio extension
needs greenlet (the `[asyncio]` extra), which the synchronous lock, the anchor store
and the run history do without.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from firefly_scheduling_database.lease_lock import DatabaseLeaseLock
from firefly_scheduling_database.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_database.aio_lock import AsyncDatabaseLeaseLock

__all__ = ["AsyncDatabaseLeaseLock", "DatabaseLeaseLock", "__version__"]


def __getattr__(name: str) -> Any:
    if name != "AsyncDatabaseLeaseLock":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from firefly_scheduling_database.aio_lock import (  # noqa: PLC0415
            AsyncDatabaseLeaseLock,
        )
    except ImportError as err:
        raise ImportError(
            f"AsyncDatabaseLeaseLock needs SQLAlchemy's asyncio extension ({err}); install "
            f"it with: pip install 'firefly-scheduling-database[asyncio]'"
        ) from err
    return AsyncDatabaseLeaseLock
