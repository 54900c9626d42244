"""Fresh lease tables for the SQLAlchemy provider's tests, so reruns never collide.

Each test (or contract class) that writes leases works in a table of its own on the
shared server, created as `firefly-scheduling migrate` would and dropped afterwards
with everything the lock created beside it (its fence table).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.engine import lock_engine


@contextmanager
def installed_lease_table(url: str, prefix: str) -> Iterator[str]:
    """The name of a new lease table on `url`'s database, dropped on exit."""
    table = f"{prefix}_{uuid.uuid4().hex[:12]}"
    installer = DatabaseLeaseLock(url, table=table)
    installer.install()
    try:
        yield table
    finally:
        engine = lock_engine(url)
        for created in installer.tables.all:
            created.drop(engine, checkfirst=True)
        engine.dispose()
        installer.close()
