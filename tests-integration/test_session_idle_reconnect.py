"""A session backend whose idle connection died while holding nothing reconnects at once.

No lock was lost in that case, so skipping the next run (raising LockBackendError)
would be a false alarm; a session that dies while holding a lock still raises (the
session-loss contract, `SessionLossContract`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_postgres import PgAdvisoryLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from session_killers import HOLDERS, end_session

LOCKS: dict[str, type[PgAdvisoryLock] | type[MySqlNamedLock]] = {
    "postgres_url": PgAdvisoryLock,
    "mysql_url": MySqlNamedLock,
}


@pytest.mark.parametrize("server", sorted(LOCKS))
def test_an_idle_session_killed_reconnects_without_error(
    request: pytest.FixtureRequest, server: str
) -> None:
    url: str = request.getfixturevalue(server)
    lock = LOCKS[server](url)
    name = f"idle-reconnect:{server}"
    try:
        assert lock.try_acquire(name, 30)
        victim = HOLDERS[server](url, name)
        assert victim is not None
        lock.release(name)  # the session now holds nothing
        end_session(server, url, victim)
        assert lock.try_acquire(name, 30) is True
        assert lock.is_lost(name) is False
        lock.release(name)
    finally:
        lock.close()
