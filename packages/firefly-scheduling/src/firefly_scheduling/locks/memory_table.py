"""`MemoryTable`: the process-wide table behind both memory locks, like a server they share.

`InMemoryLock` (threads) and `AsyncInMemoryLock` (asyncio) are two clients of this
one table, so in one process they exclude each other on the same name, as the sync
and async adapters of a real backend do. Every operation is a few dictionary steps
under one `threading.Lock`: short enough for an event loop. Expired entries (fire
claims, lapsed leases) are purged at most once a second.
"""

from __future__ import annotations

import threading
import time

#: Seconds between two purges of expired entries.
PURGE_INTERVAL_SECONDS = 1.0


class MemoryTable:
    """Leases `name -> (owner, monotonic expiry)` and fence counters, thread-safe."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._leases: dict[str, tuple[str, float]] = {}
        self._fences: dict[str, int] = {}
        self._next_purge = 0.0

    def __len__(self) -> int:
        with self._mutex:
            return len(self._leases)

    def acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        now = time.monotonic()
        with self._mutex:
            self._purge_when_due(now)
            holder = self._leases.get(name)
            if holder is not None and holder[1] > now:
                return False
            self._leases[name] = (owner, now + ttl_seconds)
            return True

    def release(self, name: str, owner: str) -> bool:
        with self._mutex:
            holder = self._leases.get(name)
            if holder is None or holder[0] != owner:
                return False
            del self._leases[name]
            return holder[1] > time.monotonic()

    def renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        now = time.monotonic()
        with self._mutex:
            holder = self._leases.get(name)
            if holder is None or holder[0] != owner or holder[1] <= now:
                return False
            self._leases[name] = (owner, now + ttl_seconds)
            return True

    def fence(self, name: str) -> int:
        with self._mutex:
            self._fences[name] = self._fences.get(name, 0) + 1
            return self._fences[name]

    def _purge_when_due(self, now: float) -> None:
        """Drop expired entries; called under the mutex, at most once a second."""
        if now < self._next_purge:
            return
        self._next_purge = now + PURGE_INTERVAL_SECONDS
        for name in [name for name, (_, until) in self._leases.items() if until <= now]:
            del self._leases[name]


#: The one table of this process, shared by every memory lock of either flavour.
PROCESS_TABLE = MemoryTable()
