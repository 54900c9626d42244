"""Per-process state reset in a forked child (`os.fork`, gunicorn `--preload`, multiprocessing).

A child process starts with a copy of its parent's memory: its sockets, its pooled
database connections, its locks' records of what they hold. Used as they are, the
child talks on the parent's connections (the two processes' replies interleave on one
socket, or the child's exit ends the parent's session), and the child believes it
holds the parent's locks (it could release or renew them with their owner tokens).
redis-py and psycopg guard against this by checking the process id; this module does
it once for everything here that keeps such state: an object registers a `reset`
that `os.register_at_fork` runs in the child, right after the fork, while the child
still has a single thread (so a reset may replace a mutex that a parent thread held
at the moment of the fork, which the child could otherwise never acquire).

A reset must only drop or replace local state, never close a connection with a
message to the server (that would end the parent's session too).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

logger = logging.getLogger("firefly_scheduling.concurrency.forks")

_Owner = TypeVar("_Owner")

_mutex = threading.Lock()
#: Live owner -> its reset. Weak: registering never keeps an object alive.
_resets: weakref.WeakKeyDictionary[Any, Callable[[Any], None]] = weakref.WeakKeyDictionary()


def reset_in_forked_child(owner: _Owner, reset: Callable[[_Owner], None]) -> None:
    """Run `reset(owner)` in every child forked while `owner` is alive."""
    with _mutex:
        _resets[owner] = reset


def _after_fork_in_child() -> None:
    global _mutex  # noqa: PLW0603 - the parent's mutex may be held by a thread that is gone
    _mutex = threading.Lock()
    for owner, reset in list(_resets.items()):
        try:
            reset(owner)
        except Exception:  # one failing reset must not leave the others undone
            logger.exception("resetting %r after a fork failed", owner)


os.register_at_fork(after_in_child=_after_fork_in_child)
