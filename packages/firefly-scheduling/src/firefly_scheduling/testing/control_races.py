# Generated from control_races_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""The concurrency rules of the control store contract: racing takers, shared instances.

A trigger is taken exactly once by clients racing for it: coroutines (asyncio),
threads and processes (synchronous); one instance serves more callers at once than
it has connections. Part of `AsyncControlStoreContract`. Written once, for asyncio;
`control_races.py` is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

import threading

import pytest

from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.testing.control_nodes import (
    ControlFixtures,
    ControlStores,
    StoreFactory,
)

#: How many clients race for one trigger.
RACERS = 8
#: How many callers share one instance at once (more than any store's connections).
SHARED_CALLERS = 16


class ControlConcurrencyContract(ControlFixtures):
    """Triggers taken once under races; one instance shared by many callers."""

    def test_a_trigger_is_taken_exactly_once_by_racing_threads(
        self, stores: ControlStores, task: str
    ) -> None:
        operator = stores()
        racers = [stores() for _ in range(RACERS)]
        for racer in racers:
            racer.now()  # connected, so the race is the take alone
        for round_ in range(3):
            asked = operator.request_trigger(task, by=f"round{round_}")
            start = threading.Barrier(RACERS)
            taken: list[object] = []

            def take(racer: ControlStore, start: threading.Barrier, taken: list[object]) -> None:
                start.wait()
                taken.append(racer.take_trigger(task))

            threads = [
                threading.Thread(target=take, args=(racer, start, taken)) for racer in racers
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            assert not any(thread.is_alive() for thread in threads), "a take hung"
            won = [trigger for trigger in taken if trigger is not None]
            assert won == [asked], f"round {round_}: {len(won)} threads took the trigger"
            assert stores().triggers(task) == [], "a taken trigger is still pending"

    def test_a_trigger_is_taken_exactly_once_by_racing_processes(
        self, stores: ControlStores, control_store_factory: StoreFactory, task: str
    ) -> None:
        from firefly_scheduling.testing.control_workers import (  # noqa: PLC0415
            race_in_processes,  # spawns processes: imported by the case that needs it
        )

        operator = stores()
        if not operator.shared_across_processes:
            pytest.skip(f"{operator!r} keeps its records in one process")
        asked = [operator.request_trigger(task, by="alice") for _ in range(2)]
        taken = race_in_processes(control_store_factory, task, RACERS)
        won = [trigger_id for trigger_id in taken if trigger_id is not None]
        assert sorted(won) == sorted(t.id for t in asked), f"taken: {taken}"
        assert stores().triggers(task) == [], "a taken trigger is still pending"

    def test_one_instance_serves_many_threads_at_once(
        self, stores: ControlStores, task: str
    ) -> None:
        shared = stores()
        shared.pause(task, by="alice")
        start = threading.Barrier(SHARED_CALLERS)
        seen: list[object] = []
        failures: list[BaseException] = []

        def read() -> None:
            start.wait()
            try:
                seen.append(shared.pause_of(task))
            except Exception as err:  # noqa: BLE001 - every failure is reported below
                failures.append(err)

        threads = [threading.Thread(target=read) for _ in range(SHARED_CALLERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert failures == []
        assert len(seen) == SHARED_CALLERS
        assert all(pause is not None for pause in seen)
