"""The steering loops' shared change mark: one loop polls it, the others follow it.

A follower sleeps until the poller's read finds the mark moved, and reads the mark
itself only when nobody did lately; the store's mark is read at most once per
freshness, whoever asks.
"""

from __future__ import annotations

import asyncio
import threading

from firefly_scheduling.control.memory import MemoryControlStore
from firefly_scheduling.control.memory_async import AsyncMemoryControlStore
from firefly_scheduling.control.records import ControlStoreError
from firefly_scheduling.hosts.runtime.change_mark import ChangeMark
from firefly_scheduling.hosts.runtime.change_mark_async import AsyncChangeMark

#: A follower's timeout no test waits out: only a wake-up ends its wait in time.
LONG = 60.0


class CountedStore(MemoryControlStore):
    """A memory store that counts its mark reads, and can be made to fail them."""

    def __init__(self) -> None:
        super().__init__()
        self.mark_reads = 0
        self.failing = False

    def change_mark(self) -> str | None:
        self.mark_reads += 1
        if self.failing:
            raise ControlStoreError("the store is down")
        return super().change_mark()


def _follow(mark: ChangeMark, timeout: float) -> tuple[threading.Thread, list[bool]]:
    """A follower that made its first pass, now waiting on `mark` in a thread."""
    reader = mark.reader()
    assert reader.wait_moved(0.0)  # the first look always makes a pass
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(reader.wait_moved(timeout)))
    thread.start()
    return thread, seen


def test_a_follower_wakes_when_the_pollers_read_finds_the_mark_moved() -> None:
    store = CountedStore()
    mark = ChangeMark(store, fresh_for=0.0)
    poller = mark.reader()
    assert poller.moved()
    follower, seen = _follow(mark, LONG)
    store.pause("app:nightly", by="ops")
    assert poller.moved()
    follower.join(timeout=10)
    assert not follower.is_alive(), "the follower slept through the move"
    assert seen == [True]


def test_a_follower_with_nothing_moved_sleeps_until_woken_and_makes_no_pass() -> None:
    store = CountedStore()
    mark = ChangeMark(store, fresh_for=0.0)
    assert mark.reader().moved()
    follower, seen = _follow(mark, LONG)
    assert mark.reader().moved()  # another poller, nothing changed: no wake-up
    follower.join(timeout=0.3)
    assert follower.is_alive()
    mark.wake()  # the host stops
    follower.join(timeout=10)
    assert seen == [False]


def test_a_follower_alone_reads_the_mark_itself_at_its_timeout() -> None:
    store = CountedStore()
    reader = ChangeMark(store, fresh_for=0.0).reader()
    assert reader.wait_moved(0.0)
    store.request_trigger("app:nightly", by="ops")
    assert reader.wait_moved(0.05) is True
    assert reader.wait_moved(0.05) is False


def test_the_mark_is_read_once_per_freshness_for_every_loop() -> None:
    store = CountedStore()
    mark = ChangeMark(store, fresh_for=LONG)
    readers = [mark.reader() for _ in range(3)]
    assert [reader.moved() for reader in readers] == [True, True, True]
    assert [reader.wait_moved(0.0) for reader in readers] == [False, False, False]
    assert store.mark_reads == 1


def test_a_failed_read_makes_each_loop_pass_once_not_at_every_look() -> None:
    store = CountedStore()
    mark = ChangeMark(store, fresh_for=LONG)
    reader = mark.reader()
    store.failing = True
    assert reader.moved() is True  # the pass meets the failure, and logs it
    assert reader.moved() is False
    assert reader.wait_moved(0.0) is False


def test_an_asyncio_follower_wakes_on_the_pollers_read_and_on_wake() -> None:
    async def scenario() -> tuple[bool, bool]:
        store = AsyncMemoryControlStore()
        mark = AsyncChangeMark(store, fresh_for=0.0)
        poller, follower = mark.reader(), mark.reader()
        assert await poller.moved()
        assert await follower.wait_moved(0.0)
        waiting = asyncio.ensure_future(follower.wait_moved(LONG))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await store.pause("app:nightly", by="ops")
        assert await poller.moved()
        moved = await asyncio.wait_for(waiting, 10)
        waiting = asyncio.ensure_future(follower.wait_moved(LONG))
        await asyncio.sleep(0.05)
        mark.wake()
        woken = await asyncio.wait_for(waiting, 10)
        return moved, woken

    assert asyncio.run(scenario()) == (True, False)
