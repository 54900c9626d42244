"""`InMemoryLock`: real mutual exclusion between the threads of one process."""

from __future__ import annotations

import threading
import time
from typing import ClassVar

from firefly_scheduling.locks.base import BaseLock


class InMemoryLock(BaseLock):
    """A lease lock kept in this process's memory, on the monotonic clock.

    It excludes the threads of one process, never other processes or hosts: use it
    for tests and for single-process deployments that want the same semantics as the
    real backends. Every instance shares the process-wide table, just as instances
    of a server backend share their server.
    """

    backend_name = "memory"
    ttl_honoured = True
    session_scoped = False
    cross_process = False
    supports_fencing = True
    driver_errors = ()

    # One table per process, shared by every instance, as a server is shared by nodes.
    _process_table: ClassVar[dict[str, tuple[str, float]]] = {}
    _process_fences: ClassVar[dict[str, int]] = {}
    _process_mutex: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        super().__init__(target="process memory")
        self._table = self._process_table
        self._fences = self._process_fences
        self._mutex = self._process_mutex

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        now = time.monotonic()
        with self._mutex:
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
