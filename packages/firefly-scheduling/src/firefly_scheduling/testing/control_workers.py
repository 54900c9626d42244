"""Processes that race for one trigger, for the control store contract.

Each is a separate OS process with its own store instance, built from the backend's
picklable factory, as a node of the fleet would. They connect first, say so, and
take only when the parent releases them all at once, so the takes really race.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from multiprocessing.synchronize import Event
from typing import Any

from firefly_scheduling.testing.workers import child_processes

#: Seconds a racer or the parent waits for the others before giving up (a hung
#: server), never a measure of speed.
PATIENCE_SECONDS = 60.0


def take_once(
    factory: Callable[[], Any], task: str, start: Event, results: multiprocessing.Queue[Any]
) -> None:
    """Build a store, report ready, wait for the start, take one trigger, report it."""
    store = factory()
    try:
        store.now()  # connects, so the race is the take alone
        results.put(("ready", None))
        start.wait(PATIENCE_SECONDS)
        taken = store.take_trigger(task)
        results.put(("taken", None if taken is None else taken.id))
    except BaseException as err:
        results.put(("failed", f"{type(err).__name__}: {err}"))
        raise
    finally:
        store.close()


def race_in_processes(factory: Callable[[], Any], task: str, racers: int) -> list[str | None]:
    """What each of `racers` processes took of `task`'s triggers, racing."""
    context = child_processes()
    start = context.Event()
    results: multiprocessing.Queue[Any] = context.Queue()
    processes = [
        context.Process(target=take_once, args=(factory, task, start, results))
        for _ in range(racers)
    ]
    for process in processes:
        process.start()
    try:
        for _ in range(racers):
            kind, detail = results.get(timeout=PATIENCE_SECONDS)
            assert kind == "ready", f"a racing process failed before the race: {detail}"
        start.set()
        taken: list[str | None] = []
        for _ in range(racers):
            kind, detail = results.get(timeout=PATIENCE_SECONDS)
            assert kind == "taken", f"a racing process failed: {detail}"
            taken.append(detail)
        return taken
    finally:
        for process in processes:
            process.join(PATIENCE_SECONDS)
            if process.is_alive():
                process.kill()
