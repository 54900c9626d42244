"""`FlockLock`: a lease lock in files of a local directory, for the processes of one host.

A lease is a record `{owner, expires}` on the kernel's monotonic clock, which every
process of the host shares. Renewable; no fencing tokens.
"""

from __future__ import annotations

import time
from typing import ClassVar

from firefly_flock.files import Record, directory_of, locked_update
from firefly_scheduling import BaseLock


class FlockLock(BaseLock):
    """Leases kept in `flock:///dir`, excluding the processes of one host."""

    backend_name = "flock"
    ttl_honoured = True
    session_scoped = False
    cross_process = True
    supports_fencing = False
    renewable = True
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError, ValueError)

    def __init__(self, url: str) -> None:
        self._directory = directory_of(url, what="lock provider")
        super().__init__(target=url.strip())

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        def take(record: Record | None) -> tuple[Record | None, bool]:
            now = time.monotonic()
            if record is not None and record["expires"] > now:
                return record, False
            return {"owner": owner, "expires": now + ttl_seconds}, True

        return locked_update(self._directory, name, take)

    def _release(self, name: str, owner: str) -> bool:
        def give_back(record: Record | None) -> tuple[Record | None, bool]:
            if record is None or record["owner"] != owner:
                return record, False
            return None, True

        return locked_update(self._directory, name, give_back)

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        def extend(record: Record | None) -> tuple[Record | None, bool]:
            now = time.monotonic()
            if record is None or record["owner"] != owner or record["expires"] <= now:
                return record, False
            return {"owner": owner, "expires": now + ttl_seconds}, True

        return locked_update(self._directory, name, extend)
