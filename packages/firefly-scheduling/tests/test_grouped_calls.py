"""`GroupedCalls`: calls that wait while a group is sent go together in the next one.

Real threads; the send function records each group it was given, and the first
group is held on the wire until the others have queued.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from firefly_scheduling.concurrency.grouped import GroupedCalls


class _Wire:
    """A `send` that answers each item doubled, holding its first group until released."""

    def __init__(self, *, fail_on: int | None = None) -> None:
        self.groups: list[list[int]] = []
        self.release_first = threading.Event()
        self.first_on_the_wire = threading.Event()
        self._fail_on = fail_on

    def send(self, items: Sequence[int]) -> list[int]:
        self.groups.append(list(items))
        if len(self.groups) == 1:
            self.first_on_the_wire.set()
            assert self.release_first.wait(10)
        if self._fail_on in items:
            raise ConnectionError(f"the group with {self._fail_on} failed")
        return [item * 2 for item in items]


_Answers = dict[int, int | BaseException]


def _call_all(
    calls: GroupedCalls[int, int], items: range
) -> tuple[_Answers, list[threading.Thread]]:
    """`calls.call` of each item from its own thread, started; their answers fill in."""
    answers: _Answers = {}

    def one(item: int) -> None:
        try:
            answers[item] = calls.call(item)
        except Exception as err:  # noqa: BLE001 - the answer under test
            answers[item] = err

    threads = [threading.Thread(target=one, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    return answers, threads


def _behind_a_first_call(wire: _Wire, *, most: int, queued: range) -> tuple[_Answers, _Answers]:
    """Call 0 alone, held on the wire; then `queued` from their threads, all waiting
    behind it before it is let go. The answers of call 0 and of the queued ones."""
    calls: GroupedCalls[int, int] = GroupedCalls(wire.send, most=most)
    first, first_threads = _call_all(calls, range(1))
    assert wire.first_on_the_wire.wait(10)
    answers, threads = _call_all(calls, queued)
    deadline = time.monotonic() + 10
    while len(calls._queue) < len(queued):
        assert time.monotonic() < deadline
        time.sleep(0.005)
    wire.release_first.set()
    for thread in [*first_threads, *threads]:
        thread.join(10)
    return first, answers


def test_calls_that_wait_for_a_group_on_the_wire_go_in_the_next_one() -> None:
    wire = _Wire()
    first, answers = _behind_a_first_call(wire, most=100, queued=range(1, 11))
    assert first == {0: 0}
    assert answers == {item: item * 2 for item in range(1, 11)}
    assert wire.groups[0] == [0]
    assert sorted(wire.groups[1]) == list(range(1, 11))
    assert len(wire.groups) == 2


def test_a_group_is_at_most_most_calls() -> None:
    wire = _Wire()
    _, answers = _behind_a_first_call(wire, most=4, queued=range(1, 11))
    assert answers == {item: item * 2 for item in range(1, 11)}
    assert [len(group) for group in wire.groups[1:]] == [4, 4, 2]


def test_every_call_of_a_failed_group_raises_its_error_and_the_next_group_is_sent() -> None:
    wire = _Wire(fail_on=5)
    _, answers = _behind_a_first_call(wire, most=4, queued=range(1, 9))
    failed_group = next(group for group in wire.groups if 5 in group)
    for item in range(1, 9):
        if item in failed_group:
            assert isinstance(answers[item], ConnectionError), answers
        else:
            assert answers[item] == item * 2


def test_most_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="most=0"):
        GroupedCalls(list, most=0)
