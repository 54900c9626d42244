"""PostgreSQL advisory-lock backend for firefly-scheduling (provider `postgres`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from firefly_scheduling.providers.lazy import lock_exports
from firefly_scheduling_postgres.provider import PROVIDER
from firefly_scheduling_postgres.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_postgres.lock import PgAdvisoryLock
    from firefly_scheduling_postgres.lock_async import AsyncPgAdvisoryLock

__all__ = ["AsyncPgAdvisoryLock", "PgAdvisoryLock", "__version__"]

# The lock classes the descriptor names, imported on first use: loading the descriptor
# (`provider.py`) imports no driver.
__getattr__ = lock_exports(__name__, PROVIDER)
