# Generated from grouped_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`GroupedCalls`: calls from many callers sent to the server together (a group commit).

A resident host runs the fires of one instant in many workers at once, and each
ends with a lease release and a history write (a run's finish). One at a time, each
costs a round trip or two and the hand-offs around them. Here each call joins a
queue, and whoever holds the sender's mutex sends everything queued in one go
(`send`), then leaves each caller its own answer, or the error the whole group
failed with. No call waits for a timer or for others to arrive: a call alone is
sent at once, a call that arrives while a group is on the wire goes in the next.

Written for asyncio (tasks of one event loop); `grouped.py`, for threads, is
generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeAlias, TypeVar

from firefly_scheduling.concurrency.forks import reset_in_forked_child

_In = TypeVar("_In")
_Out = TypeVar("_Out")

_Send: TypeAlias = Callable[[Sequence[_In]], Sequence[_Out]]


class InterruptedGroupError(ConnectionError):
    """The group a call was sent in was interrupted (cancelled) in another caller.

    Its statement may or may not have reached the server: the call's outcome is
    unknown, as after a lost connection, hence a `ConnectionError`.
    """


class _Slot(Generic[_In, _Out]):
    __slots__ = ("done", "error", "item", "result")

    def __init__(self, item: _In) -> None:
        self.item = item
        self.done = False
        self.result: _Out | None = None
        self.error: BaseException | None = None


class GroupedCalls(Generic[_In, _Out]):
    """`call(item)` from any caller; queued items are sent `most` at a time by `send`.

    `send(items)` returns one answer per item, in order, or raises, and then every
    call of the group raises that error (as `concurrent.futures` does, the same
    exception object in each caller). A group is all or nothing only if `send` makes
    it so. A caller interrupted while its item still waits takes it back; one
    interrupted while sending raises its interruption, and the other calls of its
    group get `InterruptedGroupError`.
    """

    def __init__(self, send: _Send[_In, _Out], *, most: int) -> None:
        if most < 1:
            raise ValueError(f"a group holds at least one call, got most={most!r}")
        self._send = send
        self._most = most
        self._queue: list[_Slot[_In, _Out]] = []
        # Held only between two awaits, never across one: the queue is shared by threads
        # in the synchronous flavour.
        self._queue_mutex = threading.Lock()
        self._sender = threading.Lock()
        reset_in_forked_child(self, GroupedCalls._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        """A forked child has none of its parent's calls, and fresh mutexes: a parent
        thread may have held the sender's, a group on the wire, at the fork."""
        self._queue = []
        self._queue_mutex = threading.Lock()
        self._sender = threading.Lock()

    def call(self, item: _In) -> _Out:
        slot: _Slot[_In, _Out] = _Slot(item)
        with self._queue_mutex:
            self._queue.append(slot)
        try:
            with self._sender:
                while not slot.done:
                    self._send_next_group()
        except BaseException:
            self._withdraw(slot)
            raise
        if slot.error is not None:
            raise slot.error
        return slot.result  # type: ignore[return-value]  # set with done, unless error

    def _withdraw(self, slot: _Slot[_In, _Out]) -> None:
        """Take back an item not sent yet, so that no other caller sends it."""
        with self._queue_mutex:
            if slot in self._queue:
                self._queue.remove(slot)

    def _send_next_group(self) -> None:
        with self._queue_mutex:
            group, self._queue = self._queue[: self._most], self._queue[self._most :]
        try:
            answers = self._send([slot.item for slot in group])
            if len(answers) != len(group):
                raise RuntimeError(f"{len(group)} calls sent, {len(answers)} answers received")
        except Exception as err:  # noqa: BLE001 - each call of the group gets it
            for slot in group:
                slot.error, slot.done = err, True
            return
        except BaseException as err:  # an interrupt or a cancellation: the sender's own
            interrupted = InterruptedGroupError(
                f"the group of {len(group)} calls this one was sent in was interrupted "
                f"({type(err).__name__}); its outcome is unknown"
            )
            for slot in group:
                slot.error, slot.done = interrupted, True
            raise
        for slot, answer in zip(group, answers, strict=True):
            slot.result, slot.done = answer, True
