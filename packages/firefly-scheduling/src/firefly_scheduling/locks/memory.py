"""`InMemoryLock`: real mutual exclusion between the threads of one process."""

from __future__ import annotations

import threading
import time
from typing import ClassVar

from firefly_scheduling.locks.base import BaseLock

#: Seconds between two purges of expired entries from the process table.
PURGE_INTERVAL_SECONDS = 1.0


class InMemoryLock(BaseLock):
    """A lease lock kept in this process's memory, on the monotonic clock.

    It excludes the threads of one process, never other processes or hosts: use it
    for tests and for single-process deployments that want the same semantics as the
    real backends. Every instance shares the process-wide table, just as instances
    of a server backend share their server. Expired entries (fire claims, lapsed
    leases) are purged at most once a second, so the table holds only live leases
    and fence counters.
    """

    backend_name = "memory"
    ttl_honoured = True
    session_scoped = False
    cross_process = False
    supports_fencing = True
    renewable = True
    driver_errors = ()

    # One table per process, shared by every instance, as a server is shared by nodes.
    _process_table: ClassVar[dict[str, tuple[str, float]]] = {}
    _process_fences: ClassVar[dict[str, int]] = {}
    _process_mutex: ClassVar[threading.Lock] = threading.Lock()
    _next_purge: ClassVar[list[float]] = [0.0]

    def __init__(self) -> None:
        super().__init__(target="process memory")
        self._table = self._process_table
        self._fences = self._process_fences
        self._mutex = self._process_mutex

    @classmethod
    def entries(cls) -> int:
        """How many leases the process table holds (expired ones not yet purged included)."""
        with cls._process_mutex:
            return len(cls._process_table)

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        now = time.monotonic()
        with self._mutex:
            self._purge_when_due(now)
            holder = self._table.get(name)
            if holder is not None and holder[1] > now:
                return False
            self._table[name] = (owner, now + ttl_seconds)
            return True

    def _release(self, name: str, owner: str) -> bool:
        with self._mutex:
            holder = self._table.get(name)
            if holder is None or holder[0] != owner:
                return False
            del self._table[name]
            return holder[1] > time.monotonic()

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        now = time.monotonic()
        with self._mutex:
            holder = self._table.get(name)
            if holder is None or holder[0] != owner or holder[1] <= now:
                return False
            self._table[name] = (owner, now + ttl_seconds)
            return True

    def _fence(self, name: str) -> int:
        with self._mutex:
            self._fences[name] = self._fences.get(name, 0) + 1
            return self._fences[name]

    def _purge_when_due(self, now: float) -> None:
        """Drop expired entries; called under the mutex, at most once a second."""
        if now < self._next_purge[0]:
            return
        self._next_purge[0] = now + PURGE_INTERVAL_SECONDS
        expired = [name for name, (_, until) in self._table.items() if until <= now]
        for name in expired:
            del self._table[name]
