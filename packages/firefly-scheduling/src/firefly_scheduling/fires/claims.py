"""Fire claims: one ordinary lock acquisition that blocks every later attempt at a fire.

A lock released the moment a 1 ms body ends lets a node that wakes a second later
(its clock, or its scheduler, is late) run the same fire again. So before a locked
task runs, the node claims the FIRE, `(task, instant)`, and nobody ever gives that
claim back before the fire's window has passed:

* The claim is a `DistributedLock.try_acquire` of a name derived from the task and
  the instant (`claim_name`), so it works on every backend, needs nothing new from
  any of them, and costs one round trip.
* Its window is `instant + grace + clock_skew` on the claiming node's clock
  (`claim_seconds`). A node attempts a fire only while it is at most `grace` late by
  ITS clock; a node whose clock runs `d` seconds slower than the claimer's may
  still attempt it `d` seconds after the claimer's window, so the window carries
  `clock_skew`, the largest clock difference between two nodes the fleet tolerates.
* Lease backends (Redis, memcached, database, memory) take the window as the TTL and
  forget the claim at once: the server frees it at the end, with no round trip.
* Session backends (PostgreSQL, MySQL) cannot expire a lock, so the claim stays held
  by the node's session and is released by `FireClaims.release_due()` once its
  window has passed (the runner calls it after every fire). If that session dies,
  its claims go with it: a late node could then claim such a fire again, which the
  run history refuses when one is configured (see docs/guarantees.md).

The claim is not the mutual exclusion between different fires of a task (the task
lock stays for that) and carries no fencing token (the task lock's does): a fencing
counter per fire would leave one counter row per fire on the server forever.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from firefly_scheduling.instants import as_utc
from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling.locks.port import DistributedLock
from firefly_scheduling.locks.validation import MAX_LOCK_NAME_LENGTH

#: Every claim name starts with it; lock names starting with `firefly:` are reserved.
CLAIM_PREFIX = "firefly:fire:"
_HASHED = "sha256:"
# Fixed width, so the instant part of a name can never run into the task part.
_STAMP_FORMAT = "%Y%m%dT%H%M%S.%fZ"


def claim_name(target: str, lock_name: str, instant: datetime) -> str:
    """The lock name claiming the fire of `target` at `instant`; identical on every node.

    `firefly:fire:<UTC instant to the microsecond>:<task>`. The task part is the
    target itself when the task's lock is named after it (`lock=True`) and the whole
    name fits in 255 characters; otherwise it is the SHA-256 of the pair
    (lock name, target), so that two tasks sharing a lock name still have one claim
    each per instant, and a lock name shared by two deployments' different tasks
    never merges their claims. A readable part never starts with `sha256:`, so the two
    forms cannot collide; a target that is not valid Unicode is hashed too.
    """
    stamp = as_utc(instant).strftime(_STAMP_FORMAT)
    prefix = f"{CLAIM_PREFIX}{stamp}:"
    if (
        lock_name == target
        and not target.startswith(_HASHED)
        and len(prefix) + len(target) <= MAX_LOCK_NAME_LENGTH
        and _is_text(target)
    ):
        return prefix + target
    # JSON of the pair is an unambiguous encoding of two arbitrary strings.
    identity = json.dumps([lock_name, target]).encode("ascii")
    return prefix + _HASHED + hashlib.sha256(identity).hexdigest()


def _is_text(name: str) -> bool:
    """Whether `name` is valid Unicode (no lone surrogate), as lock names must be."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def claim_seconds(instant: datetime, now: datetime, *, grace: float, clock_skew: float) -> float:
    """How long a claim taken at `now` must live: until `instant + grace + clock_skew`.

    Non-negative whenever the fire is still claimable (`now <= instant + grace`), and
    positive when `clock_skew > 0`; the runner treats a non-positive window as too late.
    """
    window_end = as_utc(instant) + timedelta(seconds=grace + clock_skew)
    return (window_end - as_utc(now)).total_seconds()


class FireClaims:
    """Takes fire claims on one lock and keeps each for its window.

    Thread-safe: one instance serves every task of a host. `close()` releases the
    claims a session backend still holds (they would otherwise go with the session).
    """

    def __init__(
        self, lock: DistributedLock, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._lock = lock
        self._monotonic = monotonic
        self._session_scoped = bool(getattr(lock, "session_scoped", False))
        self._mutex = threading.Lock()
        # Session backends only: claim name -> monotonic instant its window ends.
        self._held: dict[str, float] = {}

    def claim(self, name: str, seconds: float) -> bool:
        """Try to claim `name` for `seconds`; False when another attempt got it first.

        Raises `LockBackendError` when the backend fails, like `try_acquire`.
        """
        if not self._lock.try_acquire(name, seconds):
            return False
        if self._session_scoped:
            with self._mutex:
                self._held[name] = self._monotonic() + seconds
        elif isinstance(self._lock, BaseLock):
            self._lock.forget(name)
        return True

    def held(self) -> int:
        """How many claims this instance still has to release (session backends)."""
        with self._mutex:
            return len(self._held)

    def release_due(self) -> int:
        """Release the session-held claims whose window has passed; return how many."""
        now = self._monotonic()
        with self._mutex:
            due = [name for name, until in self._held.items() if until <= now]
            for name in due:
                del self._held[name]
        for name in due:
            self._let_go(name)
        return len(due)

    def close(self) -> None:
        """Release every claim still held, due or not (the host is stopping)."""
        with self._mutex:
            names = list(self._held)
            self._held.clear()
        for name in names:
            self._let_go(name)

    def _let_go(self, name: str) -> None:
        # A claim whose session died is already gone from the server (and was logged
        # as lost then); releasing it would only log the loss a second time.
        if isinstance(self._lock, BaseLock) and self._lock.is_lost(name):
            self._lock.forget(name)
        else:
            self._lock.release(name)
