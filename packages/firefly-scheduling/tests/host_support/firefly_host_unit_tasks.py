"""Importable task bodies for the host unit tests (the tests put this directory on sys.path).

Each body records its call in `CALLS` as `(name, wall-clock start, wall-clock end)`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime

from firefly_scheduling import current_fire

CALLS: list[tuple[str, float, float]] = []
#: `stamped` runs: (the fire's instant, wall-clock start read in the body).
STAMPED: list[tuple[datetime, float]] = []
_MUTEX = threading.Lock()
#: How long `slow` sleeps; tests may change it.
SLOW_SECONDS = 0.3
#: `flaky` runs: (the fire's instant, its attempt), in order.
ATTEMPTS: list[tuple[datetime, int]] = []
#: How many runs of each fire `flaky` fails before it succeeds; tests may change it.
FLAKY_FAILURES = 1


def _record(name: str, started: float) -> None:
    with _MUTEX:
        CALLS.append((name, started, time.time()))


def calls(name: str) -> list[tuple[str, float, float]]:
    with _MUTEX:
        return [call for call in CALLS if call[0] == name]


def reset() -> None:
    global FLAKY_FAILURES  # noqa: PLW0603 - a test knob, reset between tests
    with _MUTEX:
        CALLS.clear()
        STAMPED.clear()
        ATTEMPTS.clear()
        FLAKY_FAILURES = 1


def flaky() -> None:
    """Fails the first `FLAKY_FAILURES` runs of each fire, then succeeds."""
    fire = current_fire()
    assert fire is not None
    with _MUTEX:
        ATTEMPTS.append((fire.instant, fire.attempt))
        runs = sum(1 for instant, _ in ATTEMPTS if instant == fire.instant)
    if runs <= FLAKY_FAILURES:
        raise RuntimeError(f"flaky: run {runs} of the fire fails")


def stamped() -> None:
    started = time.time()
    fire = current_fire()
    with _MUTEX:
        STAMPED.append((fire.instant, started))


def ping() -> None:
    _record("ping", time.time())


def pong() -> None:
    _record("pong", time.time())


def boom() -> None:
    started = time.time()
    _record("boom", started)
    raise RuntimeError("boom")


def overrun() -> None:
    """Run past the fire's `timeout=`: wait until the fire says so (at most 30 s)."""
    started = time.time()
    fire = current_fire()
    assert fire is not None
    give_up = time.monotonic() + 30.0
    while not fire.timed_out and time.monotonic() < give_up:
        time.sleep(0.01)
    _record("overrun", started)


async def overrun_async() -> None:
    """A coroutine body longer than any test's timeout: recorded only if never cancelled."""
    started = time.time()
    await asyncio.sleep(30.0)
    _record("overrun_async", started)


def slow() -> None:
    started = time.time()
    time.sleep(SLOW_SECONDS)
    _record("slow", started)


class Service:
    """A method task; `instances` counts how many objects the host built."""

    instances = 0

    def __init__(self, tag: str = "default") -> None:
        Service.instances += 1
        self.tag = tag

    def work(self) -> None:
        _record(f"work:{self.tag}", time.time())
