# Generated from leadership_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""Leader election on any lock: `leadership` and `run_as_leader`.

A leader is whoever holds the lock `name`: it campaigns by waiting for the lock
(`wait=math.inf` by default), keeps its lease alive through the process's one
renewer for as long as it leads (`hold(..., keep_alive=True)`), and learns of a lost
lease or session through `lead.lost`. When the leader dies, its lease lapses (lease
backends) or its session ends (PostgreSQL, MySQL), and the next campaigner, waiting
on the server, takes over. `lead.token` is the fencing token where the backend has
one: stamp the leader's writes with it so that a deposed leader's late writes are
refused.

Limits, per backend, are in the plain-lock guide (`docs/locks.md`); chiefly, a
session backend's leader that is stopped (SIGSTOP, a frozen VM) keeps its session,
and so its leadership, until the server ends the session.

Written once, for asyncio; `locks/leadership.py` (`leadership`, `run_as_leader`) is
generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from firefly_scheduling.locks.hold import Hold, hold
from firefly_scheduling.locks.port import DistributedLock

logger = logging.getLogger("firefly_scheduling.locks.leadership")

T = TypeVar("T")


class LeadershipTimeout(TimeoutError):
    """The campaign for `name` did not win within `wait` seconds."""

    def __init__(self, name: str, wait: float) -> None:
        super().__init__(f"leadership of {name!r} was not won within {wait:g} s")
        self.name = name
        self.wait = wait


@contextmanager
def leadership(
    lock: DistributedLock, name: str, ttl_seconds: float, *, wait: float = math.inf
) -> Iterator[Hold]:
    """Campaign for `name` (up to `wait` seconds), then lead while the block runs.

    Yields the leadership (`lead.token`, `lead.lost`, `lead.wait_lost()`), renewed every
    `ttl_seconds / 3`; gives it up on exit. Raises `LeadershipTimeout` when `wait`
    passed first. The block is not interrupted when leadership is lost: watch
    `lead.lost`, or let `run_as_leader` cancel the work::

        with leadership(lock, "consumer", 15) as lead:
            while not lead.lost:
                consume_one(fence=lead.token)
    """
    with hold(lock, name, ttl_seconds, wait=wait, keep_alive=True) as lead:
        if not lead:
            raise LeadershipTimeout(name, wait)
        yield lead


def run_as_leader(
    lock: DistributedLock,
    name: str,
    fn: Callable[[Hold], T],
    ttl_seconds: float,
) -> T:
    """Run `fn(lead)` while this process leads `name`; campaign again after a loss.

    A thread cannot be interrupted safely, so `fn` watches `lead.lost` (or waits on
    `lead.wait_lost()`) and returns when it is set; the lock is then given up and
    the campaign starts over. Returns what `fn` returns (and raises what it raises)
    once it returns while still leading.
    """
    while True:
        with leadership(lock, name, ttl_seconds) as lead:
            result = fn(lead)
            if not lead.lost:
                return result
        logger.warning("leadership of %r was lost; campaigning again", name)
