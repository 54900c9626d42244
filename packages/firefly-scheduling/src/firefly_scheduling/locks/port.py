"""The port every lock backend implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class DistributedLock(Protocol):
    """A named, non-blocking, owner-checked lock shared by the nodes of a fleet.

    The rules every implementation follows (the contract suite in
    `firefly_scheduling.testing` proves them on the real server):

    * `try_acquire` never blocks: it wins at once or returns False, at the cost of
      one bounded round trip.
    * It is not re-entrant: while an instance holds a name, its own second
      `try_acquire` of that name returns False.
    * `release` is owner-checked: releasing a name this instance does not hold does
      nothing, and a late release never frees a newer holder's lock.
    * `ttl_seconds` must be finite and > 0 (`ValueError` otherwise). Lease backends
      free the lock after it; session backends hold it for the life of their
      connection.
    * Names are non-empty, at most 255 characters, contain no NUL, and are exact and
      case-sensitive.
    * A backend failure raises `LockBackendError` from `try_acquire`; `release`
      logs it and returns.
    """

    def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        """Take the lock `name` for at most `ttl_seconds`, or return False at once."""
        ...

    def release(self, name: str) -> None:
        """Give back `name` if, and only if, this instance holds it."""
        ...
