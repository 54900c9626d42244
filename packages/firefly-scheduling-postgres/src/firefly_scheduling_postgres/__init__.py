"""PostgreSQL advisory-lock backend for firefly-scheduling (provider `postgres`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from firefly_scheduling.providers.lazy import lazy_exports
from firefly_scheduling_postgres.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_postgres.advisory_lock import PgAdvisoryLock
    from firefly_scheduling_postgres.aio_lock import AsyncPgAdvisoryLock

__all__ = ["AsyncPgAdvisoryLock", "PgAdvisoryLock", "__version__"]

# Imported on first use, so that loading the descriptor (`provider.py`) imports no driver.
__getattr__ = lazy_exports(
    __name__,
    {
        "AsyncPgAdvisoryLock": "firefly_scheduling_postgres.aio_lock",
        "PgAdvisoryLock": "firefly_scheduling_postgres.advisory_lock",
    },
)
