"""Who holds a task lock, as far as this process can tell, and why a fire was skipped.

A fire whose task lock is held is skipped. With `lock=True` the name is the task's
own, so the holder can only be an earlier fire of the task still running. A lock
name given as a string may be shared by several tasks, which then starve each
other: the skip must say which task holds it, not blame "the previous fire". The
backends keep an owner token, not a task, so the holder is known only when it is
this process (every runner notes the holdings it takes); elsewhere the reason says
the lock is held by another task or by a previous fire.
"""

from __future__ import annotations

import threading


class LockHolders:
    """The task holding each task lock this process holds now. Thread-safe."""

    def __init__(self) -> None:
        self._targets: dict[str, str] = {}
        self._mutex = threading.Lock()

    def note(self, lock_name: str, target: str) -> None:
        """`target` holds `lock_name` from now on (a lock is not re-entrant: one holder)."""
        with self._mutex:
            self._targets[lock_name] = target

    def forget(self, lock_name: str, target: str) -> None:
        """`target` is about to release `lock_name`."""
        with self._mutex:
            if self._targets.get(lock_name) == target:
                del self._targets[lock_name]

    def why_held(self, lock_name: str, target: str) -> str:
        """Why the fire of `target` found `lock_name` held, in words for the log and history."""
        with self._mutex:
            holder = self._targets.get(lock_name)
        if holder is not None and holder != target:
            return f"the task {holder} holds the lock {lock_name!r} it shares (on this node)"
        if holder is not None or lock_name == target:
            return f"the previous fire still ran (lock {lock_name!r} held)"
        return (
            f"the lock {lock_name!r} is held by another task sharing it, or by a previous "
            "fire of this one"
        )
