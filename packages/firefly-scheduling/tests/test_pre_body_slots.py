"""`PreBodySlots`: a bounded start, a slot passed straight on, and nothing lost at a stop."""

from __future__ import annotations

import pytest

from firefly_scheduling.hosts.pre_body_slots import PreBodySlots


class Starts:
    """A start callable that records entries; `refuse` plays a pool that has shut down."""

    def __init__(self) -> None:
        self.started: list[tuple[str, bool]] = []
        self.refuse = False

    def __call__(self, entry: str, may_run_here: bool) -> bool:
        if self.refuse and not may_run_here:
            return False
        self.started.append((entry, may_run_here))
        return True


def test_entries_past_the_slots_wait_in_order_and_take_the_slot_given_back() -> None:
    starts = Starts()
    slots: PreBodySlots[str] = PreBodySlots(2, starts)
    handed = {}
    for entry in "abcd":
        handed[entry] = slots.slot()
        slots.dispatch(entry)
    assert [entry for entry, _ in starts.started] == ["a", "b"]
    assert slots.waiting == 2
    handed["a"].body_starts()
    handed["a"].job_ended()  # given back once only
    assert [entry for entry, _ in starts.started] == ["a", "b", "c"]
    handed["b"].job_ended()
    assert [entry for entry, _ in starts.started] == ["a", "b", "c", "d"]
    for entry in "cd":
        handed[entry].body_starts()
    slots.dispatch("e")  # two slots free again
    slots.dispatch("f")
    assert [entry for entry, _ in starts.started][-2:] == ["e", "f"]


def test_a_body_about_to_start_never_runs_the_next_fire_in_its_own_thread() -> None:
    """The pool shut down: the next fire waits for the job's end, then runs there."""
    starts = Starts()
    slots: PreBodySlots[str] = PreBodySlots(1, starts)
    first = slots.slot()
    slots.dispatch("a")
    slots.dispatch("b")
    starts.refuse = True
    first.body_starts()
    assert slots.waiting == 1, "the next fire was started or lost"
    first.job_ended()
    assert starts.started[-1] == ("b", True)
    assert slots.waiting == 0


def test_opening_starts_everything_waiting_and_everything_later() -> None:
    starts = Starts()
    slots: PreBodySlots[str] = PreBodySlots(1, starts)
    slots.dispatch("a")
    slots.dispatch("b")
    slots.dispatch("c")
    slots.open()
    slots.dispatch("d")
    assert [entry for entry, _ in starts.started] == ["a", "b", "c", "d"]


def test_no_slot_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1, got 0"):
        PreBodySlots(0, Starts())
