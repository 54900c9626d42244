"""`BatchHoldings`: which holdings of a lock are still on their batch's shared lease.

The task locks a resident node takes together share one lease per TTL
(`batch_leases.acquire_many`), so releasing or renewing one of them is not the ordinary
lease revoke or keep-alive (either would reach the whole batch). The lock notes each
such holding here when it is won and takes it out when it is released or first
renewed. A holding that lapses is never released or renewed (the base lock forgets
it), so entries past their deadline are dropped whenever a batch is added: the
record never outgrows the holdings alive. Thread-safe; used by both flavours.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable


class BatchHoldings:
    """Owner tokens of holdings on a batch lease, each with its monotonic deadline."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._deadlines: dict[str, float] = {}

    def add(self, owners: Iterable[tuple[str, float]]) -> None:
        """Note `(owner, deadline)` pairs; forget every entry whose deadline has passed."""
        now = time.monotonic()
        with self._mutex:
            for owner in [owner for owner, deadline in self._deadlines.items() if deadline < now]:
                del self._deadlines[owner]
            self._deadlines.update(owners)

    def take(self, owner: str) -> float | None:
        """Remove `owner` and return its deadline; None if it is not on a batch lease."""
        with self._mutex:
            return self._deadlines.pop(owner, None)

    def put_back(self, owner: str, deadline: float) -> None:
        """Note `owner` again: an operation that took it failed, its lease is unknown."""
        with self._mutex:
            self._deadlines[owner] = deadline

    def __len__(self) -> int:
        with self._mutex:
            return len(self._deadlines)
