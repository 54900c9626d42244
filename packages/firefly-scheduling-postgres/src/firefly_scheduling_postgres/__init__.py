"""PostgreSQL advisory-lock backend for firefly-scheduling (provider `postgres`)."""

from __future__ import annotations

from firefly_scheduling_postgres.advisory_lock import PgAdvisoryLock

__all__ = ["PgAdvisoryLock"]
