"""MySQL/MariaDB named-lock backend for firefly-scheduling (provider `mysql`)."""

from __future__ import annotations

from firefly_scheduling_mysql.aio_named_lock import AsyncMySqlNamedLock
from firefly_scheduling_mysql.named_lock import MySqlNamedLock
from firefly_scheduling_mysql.version import __version__

__all__ = ["AsyncMySqlNamedLock", "MySqlNamedLock", "__version__"]
