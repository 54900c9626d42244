"""`AsyncGroupedCalls`: the asyncio flavour, and what a cancellation does to a group.

A task cancelled while its call still waits takes the call back: nobody sends it.
A task cancelled while it sends a group raises its cancellation, and every other
call of that group gets `InterruptedGroupError` (a `ConnectionError`: its statement
may or may not have reached the server), never somebody else's cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from firefly_scheduling.concurrency.grouped_async import AsyncGroupedCalls, InterruptedGroupError


class _Wire:
    """A `send` that answers each item doubled; the first group sent while `hold` is
    set waits on the wire until `let_go` is set."""

    def __init__(self) -> None:
        self.groups: list[list[int]] = []
        self.hold = True
        self.on_the_wire = asyncio.Event()
        self.let_go = asyncio.Event()

    async def send(self, items: Sequence[int]) -> list[int]:
        self.groups.append(list(items))
        if self.hold:
            self.hold = False
            self.on_the_wire.set()
            await self.let_go.wait()
        return [item * 2 for item in items]


async def _queued(calls: AsyncGroupedCalls[int, int], count: int) -> None:
    async with asyncio.timeout(10):
        while len(calls._queue) < count:
            await asyncio.sleep(0.001)


def test_waiting_calls_go_together_in_the_next_group() -> None:
    async def scenario() -> None:
        wire = _Wire()
        calls: AsyncGroupedCalls[int, int] = AsyncGroupedCalls(wire.send, most=100)
        first = asyncio.create_task(calls.call(0))
        await wire.on_the_wire.wait()
        others = [asyncio.create_task(calls.call(item)) for item in range(1, 11)]
        await _queued(calls, 10)
        wire.let_go.set()
        assert await first == 0
        assert await asyncio.gather(*others) == [item * 2 for item in range(1, 11)]
        assert wire.groups == [[0], list(range(1, 11))]

    asyncio.run(scenario())


def test_a_call_cancelled_while_waiting_is_taken_back_and_never_sent() -> None:
    async def scenario() -> None:
        wire = _Wire()
        calls: AsyncGroupedCalls[int, int] = AsyncGroupedCalls(wire.send, most=100)
        first = asyncio.create_task(calls.call(0))
        await wire.on_the_wire.wait()
        kept = asyncio.create_task(calls.call(1))
        dropped = asyncio.create_task(calls.call(2))
        await _queued(calls, 2)
        dropped.cancel()
        with pytest.raises(asyncio.CancelledError):
            await dropped
        wire.let_go.set()
        assert await first == 0
        assert await kept == 2
        assert wire.groups == [[0], [1]]

    asyncio.run(scenario())


def test_a_sender_cancelled_alone_on_the_wire_does_not_touch_the_calls_behind_it() -> None:
    async def scenario() -> None:
        wire = _Wire()
        calls: AsyncGroupedCalls[int, int] = AsyncGroupedCalls(wire.send, most=100)
        first = asyncio.create_task(calls.call(0))
        await wire.on_the_wire.wait()
        others = [asyncio.create_task(calls.call(item)) for item in (1, 2, 3)]
        await _queued(calls, 3)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert await asyncio.gather(*others) == [2, 4, 6]
        assert wire.groups == [[0], [1, 2, 3]]

    asyncio.run(scenario())


def test_the_others_of_a_group_whose_sender_is_cancelled_get_interrupted_group() -> None:
    async def scenario() -> None:
        wire = _Wire()
        calls: AsyncGroupedCalls[int, int] = AsyncGroupedCalls(wire.send, most=100)
        first = asyncio.create_task(calls.call(0))
        await wire.on_the_wire.wait()
        group = [asyncio.create_task(calls.call(item)) for item in (5, 6, 7)]
        await _queued(calls, 3)
        # Let call 0 go and hold the next group, sent by the first of 5, 6, 7 to take
        # the sender's mutex (asyncio's locks are first come, first served: 5).
        wire.on_the_wire.clear()
        first_gate, wire.let_go = wire.let_go, asyncio.Event()
        wire.hold = True
        first_gate.set()
        assert await first == 0
        await wire.on_the_wire.wait()
        assert wire.groups[-1] == [5, 6, 7]
        group[0].cancel()
        with pytest.raises(asyncio.CancelledError):
            await group[0]
        for task in group[1:]:
            with pytest.raises(InterruptedGroupError, match="group of 3 calls"):
                await task
        assert isinstance(InterruptedGroupError("x"), ConnectionError)

    asyncio.run(scenario())
