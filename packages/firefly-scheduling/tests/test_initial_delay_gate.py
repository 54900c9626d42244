"""InitialDelayGate over in-memory stores, on a fake clock (no sleeping)."""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from datetime import UTC, datetime
from typing import ClassVar

import pytest

from firefly_scheduling import ConfigurationError, ScheduledDescriptor, Settings
from firefly_scheduling.initial_delay import (
    Anchor,
    AnchorStoreError,
    BaseAnchorStore,
    InitialDelayGate,
    MemoryAnchorStore,
    anchor_key,
    check_initial_delays,
    warn_if_per_process,
)
from firefly_scheduling.initial_delay.gate import first_run_from

DELAYED = ScheduledDescriptor(target="app.jobs:warm_up", fixed_rate=10.0, initial_delay=5.0)
PLAIN = ScheduledDescriptor(target="app.jobs:plain", fixed_rate=10.0)


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def table() -> dict[str, str]:
    """One 'server': the table every store instance of a test shares."""
    return {}


def gate(table: dict[str, str], clock: FakeClock, release: str = "") -> InitialDelayGate:
    """A gate as a fresh process would build it: its own store instance, the shared table."""
    return InitialDelayGate(MemoryAnchorStore(clock=clock, table=table), release=release)


class UnreadableStore(BaseAnchorStore):
    """Accepts writes and never returns them (a null cache)."""

    store_name = "null"
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = ()

    def _add(self, key: str, value: str) -> bool:
        return True

    def _get(self, key: str) -> str | None:
        return None

    def _replace(self, key: str, expected: str, value: str) -> bool:
        return False


class DownStore(UnreadableStore):
    store_name = "down"
    driver_errors = (ConnectionError,)

    def _get(self, key: str) -> str | None:
        raise ConnectionError("connection refused")


class UntouchableStore(UnreadableStore):
    """Fails the test on any use (AssertionError is not a driver error: it propagates)."""

    def _now(self) -> float:
        raise AssertionError("the store was used")

    def _get(self, key: str) -> str | None:
        raise AssertionError("the store was used")


def test_a_task_without_delay_is_admitted_without_touching_the_store() -> None:
    assert InitialDelayGate(UntouchableStore()).admit(PLAIN) is True


def test_the_first_observation_anchors_and_the_window_then_elapses(
    table: dict[str, str], clock: FakeClock
) -> None:
    first = gate(table, clock)
    assert first.admit(DELAYED) is False
    anchor = Anchor.decode(table[anchor_key(DELAYED.target)])
    assert anchor == Anchor(clock.now, "")
    clock.now += 4.9
    assert first.admit(DELAYED) is False
    clock.now += 0.1
    assert first.admit(DELAYED) is True


def test_later_processes_measure_from_the_first_observation(
    table: dict[str, str], clock: FakeClock
) -> None:
    assert gate(table, clock).admit(DELAYED) is False  # process 1 anchors
    clock.now += 2
    assert gate(table, clock).admit(DELAYED) is False  # process 2, 2 s later
    clock.now += 3
    assert gate(table, clock).admit(DELAYED) is True  # process 3, after the window


def test_once_admitted_a_process_never_asks_the_store_again(
    table: dict[str, str], clock: FakeClock
) -> None:
    resident = gate(table, clock)
    resident.admit(DELAYED)
    clock.now += 5
    assert resident.admit(DELAYED) is True
    table.clear()  # the store forgot everything: the resident process does not care
    assert resident.admit(DELAYED) is True
    assert table == {}


def test_without_a_release_the_anchor_is_permanent(table: dict[str, str], clock: FakeClock) -> None:
    gate(table, clock).admit(DELAYED)
    clock.now += 86_400 * 30  # a redeploy a month later runs at once
    assert gate(table, clock).admit(DELAYED) is True


def test_a_new_release_re_arms_the_window_and_says_so_once(
    table: dict[str, str], clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="firefly_scheduling.initial_delay")
    assert gate(table, clock, "v1").admit(DELAYED) is False
    clock.now += 60
    assert gate(table, clock, "v1").admit(DELAYED) is True
    assert gate(table, clock, "v2").admit(DELAYED) is False  # re-armed now
    assert gate(table, clock, "v2").admit(DELAYED) is False  # same window, no new re-arm
    clock.now += 5
    assert gate(table, clock, "v2").admit(DELAYED) is True
    rearmed = [r for r in caplog.records if "re-armed" in r.getMessage()]
    assert len(rearmed) == 1
    assert "'v2'" in rearmed[0].getMessage()
    assert Anchor.decode(table[anchor_key(DELAYED.target)]) == Anchor(clock.now - 5, "v2")


def test_an_unreadable_anchor_value_is_re_armed(table: dict[str, str], clock: FakeClock) -> None:
    table[anchor_key(DELAYED.target)] = "not json"
    assert gate(table, clock).admit(DELAYED) is False
    assert Anchor.decode(table[anchor_key(DELAYED.target)]) == Anchor(clock.now, "")


def test_a_store_that_cannot_read_back_its_write_admits_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="firefly_scheduling.initial_delay")
    unreadable = InitialDelayGate(UnreadableStore())
    other = replace(DELAYED, target="app.jobs:other")
    assert unreadable.admit(DELAYED) is True
    assert unreadable.admit(other) is True
    messages = [r.getMessage() for r in caplog.records]
    assert sum("cannot read back its own write" in m for m in messages) == 1


def test_an_unreachable_store_admits_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="firefly_scheduling.initial_delay")
    assert InitialDelayGate(DownStore()).admit(DELAYED) is True
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert DELAYED.target in record.getMessage()
    assert "unreachable" in record.getMessage()


def test_store_errors_are_translated_with_the_store_named() -> None:
    with pytest.raises(AnchorStoreError, match=r"down anchor store .*connection refused"):
        DownStore().get("k")


def test_a_disabled_gate_with_a_delayed_task_refuses_to_boot() -> None:
    with pytest.raises(ConfigurationError, match="INITIAL_DELAY_ENABLED=false") as raised:
        check_initial_delays([PLAIN, DELAYED], Settings(initial_delay_enabled=False))
    assert DELAYED.target in str(raised.value)
    check_initial_delays([PLAIN], Settings(initial_delay_enabled=False))  # nothing delayed


@pytest.mark.parametrize("delay", [0.0, -1.0, math.nan, math.inf])
def test_a_delay_that_is_not_a_positive_length_refuses_to_boot(delay: float) -> None:
    with pytest.raises(ConfigurationError, match=DELAYED.target):
        check_initial_delays([replace(DELAYED, initial_delay=delay)], Settings())


def test_a_per_process_store_warns_naming_the_delayed_tasks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="firefly_scheduling.initial_delay")
    assert warn_if_per_process(MemoryAnchorStore(), [PLAIN, DELAYED], host="tick") is True
    [record] = caplog.records
    assert DELAYED.target in record.getMessage()
    assert PLAIN.target not in record.getMessage()
    assert warn_if_per_process(UnreadableStore(), [DELAYED], host="tick") is False
    assert warn_if_per_process(MemoryAnchorStore(), [PLAIN], host="tick") is False


def test_holding_back_is_logged_at_info_once_with_the_first_run_time(
    table: dict[str, str], clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    process = gate(table, clock)
    with caplog.at_level(logging.INFO, logger="firefly_scheduling.initial_delay"):
        assert not process.admit(DELAYED)
        clock.now += 1
        assert not process.admit(DELAYED)  # a second fire held back: no second INFO line
    held = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(held) == 1, held
    assert "held back until 1970-01-12 13:46:45 UTC" in held[0]  # 1_000_000 s + 5 s
    assert "first seen 1970-01-12 13:46:40 UTC" in held[0]
    caplog.clear()
    clock.now += 5
    with caplog.at_level(logging.INFO, logger="firefly_scheduling.initial_delay"):
        assert process.admit(DELAYED)
    [elapsed] = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert "has elapsed (since 1970-01-12 13:46:45 UTC)" in elapsed


def test_the_earliest_first_run_is_read_from_the_anchor(
    table: dict[str, str], clock: FakeClock
) -> None:
    store = MemoryAnchorStore(clock=clock, table=table)
    assert first_run_from(store, DELAYED) is None  # not seen yet: unknown
    gate(table, clock).admit(DELAYED)
    first = first_run_from(store, DELAYED)
    assert first == datetime.fromtimestamp(1_000_005, UTC)
    assert first_run_from(store, PLAIN) is None
