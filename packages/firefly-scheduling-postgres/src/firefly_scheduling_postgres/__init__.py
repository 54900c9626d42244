"""PostgreSQL advisory-lock backend for firefly-scheduling (provider `postgres`)."""

from __future__ import annotations

from firefly_scheduling_postgres.advisory_lock import PgAdvisoryLock
from firefly_scheduling_postgres.aio_lock import AsyncPgAdvisoryLock
from firefly_scheduling_postgres.version import __version__

__all__ = ["AsyncPgAdvisoryLock", "PgAdvisoryLock", "__version__"]
