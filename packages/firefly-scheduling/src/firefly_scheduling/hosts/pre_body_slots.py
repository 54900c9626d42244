"""`PreBodySlots`: how many won fires a resident node starts at once.

A fire the claimer won still has its steps before the body: the task lock, the run
history's read and start, and on a session backend the server's word that the lock's
session still holds it. They go through the backend's few connections (4 per node by
default on PostgreSQL and MySQL, lock and run history together). Handed to the thread
pool all at once, the 100 fires a node wins at one instant woke up to 64 threads that
queued for those connections and fought for the GIL in between: on PostgreSQL a won
fire cost 1.76 ms of CPU with 64 threads against 1.29 ms with 8, and the fleet's
lateness p99 went from 422 to 291 ms (`benchmarks/fire_cost.py`, `benchmarks/fleet.py`,
issue 12). The connections, not the threads, set the pace of those steps.

So at most `size` won fires are between their hand-off and their body; the others
wait here, in order, not in a thread. A fire gives its slot back when its body
starts (so long bodies still run side by side, as many as the pool has threads) or
when its job ends without one, and the slot goes straight to the next fire waiting.
Once the host stops (`open`), nothing waits: every fire goes to the pool at once.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

_Entry = TypeVar("_Entry")

#: Won fires in their steps before the body at once, per node: twice the SQL backends'
#: default connections (4), so each connection has its next statement waiting.
DEFAULT_PRE_BODY_SLOTS = 8


#: Starts an entry; `may_run_here` says whether the caller may run it in its own thread
#: when it cannot go anywhere else (the pool has shut down). False when it did not start.
Start = Callable[[_Entry, bool], bool]


class PreBodySlots(Generic[_Entry]):
    """At most `size` entries started and not yet in their body; the rest wait in order."""

    def __init__(self, size: int, start: Start[_Entry]) -> None:
        if size < 1:
            raise ValueError(f"pre-body slots must be at least 1, got {size!r}")
        self._free = size
        self._start = start
        self._waiting: deque[_Entry] = deque()
        self._open = False
        self._mutex = threading.Lock()

    def slot(self) -> Slot:
        """A slot for the next entry dispatched: hand it to the entry first."""
        return Slot(self._give_back)

    def dispatch(self, entry: _Entry) -> None:
        """Start `entry` now if a slot is free, else queue it until one is given back."""
        with self._mutex:
            now = self._open or self._free > 0
            if not now:
                self._waiting.append(entry)
            elif not self._open:
                self._free -= 1
        if now:
            self._start(entry, True)

    def open(self) -> None:
        """Stop limiting (the host stops): start every entry waiting, and later ones at once."""
        with self._mutex:
            self._open = True
            waiting, self._waiting = list(self._waiting), deque()
        for entry in waiting:
            self._start(entry, True)

    @property
    def waiting(self) -> int:
        with self._mutex:
            return len(self._waiting)

    def _give_back(self, at_job_end: bool) -> bool:
        """Free a slot, or pass it straight to the next entry; False when it is still held.

        An entry is never run in the thread of a fire about to start its body (that
        body would start late, after its checks): if it cannot start elsewhere, it
        goes back to the head of the queue and the slot stays held until the job ends.
        """
        with self._mutex:
            if self._open:
                return True
            if not self._waiting:
                self._free += 1
                return True
            entry = self._waiting.popleft()
        if self._start(entry, at_job_end):
            return True
        with self._mutex:
            self._waiting.appendleft(entry)
        return False


class Slot:
    """One fire's slot: given back once, when its body starts or else when its job ends.

    Both calls come from the fire's own thread, so a flag is enough to make a later
    one do nothing.
    """

    __slots__ = ("_give_back", "_held")

    def __init__(self, give_back: Callable[[bool], bool]) -> None:
        self._give_back = give_back
        self._held = True

    def body_starts(self) -> None:
        if self._held and self._give_back(False):
            self._held = False

    def job_ended(self) -> None:
        if self._held and self._give_back(True):
            self._held = False
