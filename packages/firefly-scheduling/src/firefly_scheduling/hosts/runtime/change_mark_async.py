# async-to-sync: rename AsyncControlStore ControlStore
# async-to-sync: rename AsyncChangeMark ChangeMark
# async-to-sync: rename AsyncMarkReader MarkReader
# async-to-sync: rename asyncio.Event threading.Event
"""A host's steering loops read the control store only after it changed.

The triggers, backfills and runtime schedules of a host are each watched by a loop
of their own, and each used to list its records at every poll: four or five reads
a second per node, on the fleet's database, for a store that changes a few times a
day. Every change moves the store's change mark (`AsyncControlStore.change_mark`);
the loops share one `AsyncChangeMark`, which reads it at most once per
`MARK_SECONDS`, and each loop (`AsyncMarkReader`) lists its records only when the
mark moved since its last pass, and at least every `FULL_PASS_SECONDS` (a mark
write that failed after its change, or a pass that failed, is made good then).

One loop polls the mark (`AsyncMarkReader.moved`, the triggers'); the others follow it
(`AsyncMarkReader.wait_moved`): they sleep until a read finds the mark moved, which
wakes them, and look for themselves only every `FOLLOW_SECONDS`. A node then wakes
for its steering a few times a second, not once per loop and poll.

Written once, for asyncio, in `hosts/runtime/change_mark_async.py`; the synchronous
flavour in `hosts/runtime/change_mark.py` is generated from it.
"""

from __future__ import annotations

import asyncio  # sync: drop
import contextlib  # sync: drop
import threading
import time
from collections.abc import Callable
from typing import Final

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.control.records import ControlStoreError
from firefly_scheduling.control.store_async import AsyncControlStore

#: The longest a change mark read serves the host's loops: a change is seen within
#: this plus one loop's poll (a trigger runs within 2 s of being asked).
MARK_SECONDS: Final = 1.0
#: The longest a loop goes without listing its records, whatever the mark says.
FULL_PASS_SECONDS: Final = 30.0
#: The longest a following loop sleeps without looking at the mark (it reads it
#: itself then if no other loop did within `MARK_SECONDS`).
FOLLOW_SECONDS: Final = 5.0


class _Unread:
    """The mark of a store that could not be read: equal to nothing, so every loop
    makes its pass (and meets, and logs, the store's failure)."""

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)


class AsyncChangeMark:
    """The control store's change mark, shared by one host's steering loops."""

    def __init__(
        self,
        store: AsyncControlStore,
        *,
        fresh_for: float = MARK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._fresh_for = fresh_for
        self._clock = clock
        self._value: object = _Unread()
        self._read_at = -float("inf")
        self._mutex = threading.Lock()
        #: Set (and replaced) when a read finds the mark moved, or on `wake`.
        self._moved = asyncio.Event()

    async def current(self) -> object:
        """The mark, read again when the last read is older than `fresh_for`."""
        now = self._clock()
        with self._mutex:
            if now - self._read_at < self._fresh_for:
                return self._value
            self._read_at = now  # one reader at a time; the others use the last value
        try:
            value: object = await self._store.change_mark()
        except ControlStoreError:
            value = _Unread()
        with self._mutex:
            moved = not _same(value, self._value)
            self._value = value
        if moved:
            self.wake()
        return value

    def last_read(self) -> tuple[object, asyncio.Event]:
        """The mark as last read, and the event the next move (or `wake`) sets: taken
        together, so no move falls between them."""
        with self._mutex:
            return self._value, self._moved

    def wake(self) -> None:
        """Wake every loop following the mark: it moved, or the host stops."""
        with self._mutex:
            moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    def reader(self, *, full_every: float = FULL_PASS_SECONDS) -> AsyncMarkReader:
        """A reader for one loop."""
        return AsyncMarkReader(self, full_every=full_every, clock=self._clock)


class AsyncMarkReader:
    """One loop's view of the mark: whether to make a pass now."""

    def __init__(
        self, mark: AsyncChangeMark, *, full_every: float, clock: Callable[[], float]
    ) -> None:
        self._mark = mark
        self._full_every = full_every
        self._clock = clock
        self._seen: object = _Unread()
        self._passed_at = -float("inf")

    async def moved(self) -> bool:
        """Whether the mark moved since this loop's last pass (or one is due anyway);
        True counts as the pass made. For the loop that polls the mark."""
        return self._pass_due(await self._mark.current())

    async def wait_moved(self, timeout: float) -> bool:
        """`moved`, for a loop that follows the mark: sleep until a read by another loop
        finds it moved, the mark is woken, a full pass falls due, or `timeout` passes;
        then `moved` (which reads the mark only when no loop read it lately)."""
        value, moved = self._mark.last_read()
        now = self._clock()
        if not self._due(value, now):
            wait = max(min(timeout, self._passed_at + self._full_every - now), 0.0)
            if ASYNC:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(moved.wait(), wait)
            else:
                moved.wait(wait)
        return await self.moved()

    def wake(self) -> None:
        """End the wait of every loop following this mark (the host stops)."""
        self._mark.wake()

    def _due(self, value: object, now: float) -> bool:
        return not _same(value, self._seen) or now - self._passed_at >= self._full_every

    def _pass_due(self, value: object) -> bool:
        now = self._clock()
        if not self._due(value, now):
            return False
        self._seen, self._passed_at = value, now
        return True


def _same(value: object, seen: object) -> bool:
    """Whether a loop that made its pass at `seen` has seen `value` (one failed read
    makes each loop pass once, not at every look)."""
    return value is seen or value == seen
