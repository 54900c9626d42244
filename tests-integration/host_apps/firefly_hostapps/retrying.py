"""Two locked tasks with `retries=` whose bodies write what they ran to a shared witness.

`always_fails` fails every run (2 retries); `fails_once` fails the first attempt of
each fire and succeeds after (3 retries). Each run appends one line to the file named
by `FIREFLY_HOSTAPP_WITNESS`, opened with `O_APPEND` so that lines of concurrent
processes never interleave: `node task instant attempt start end` (epoch seconds).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from firefly_hostapps.record import append_line, node, seconds
from firefly_scheduling import current_fire, scheduled

_LOCK = os.environ.get("FIREFLY_HOSTAPP_LOCK", "hostapps-retrying")
_RATE = seconds("FIREFLY_HOSTAPP_RATE", 10.0)
#: How long each run's body takes, so that an overlap would show.
BODY_SECONDS = 0.2


def _witnessed(task: str, fails: bool) -> None:
    fire = current_fire()
    assert fire is not None
    start = time.time()
    time.sleep(BODY_SECONDS)
    end = time.time()
    line = f"{node()} {task} {fire.instant.isoformat()} {fire.attempt} {start:.6f} {end:.6f}"
    append_line(line, "FIREFLY_HOSTAPP_WITNESS")
    if fails:
        raise RuntimeError(f"{task} fails (attempt {fire.attempt})")


def _retrying(lock: str, retries: int) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """`@scheduled` with `retries`, backoff 300 ms to 600 ms, under `_LOCK`-`lock`."""
    return scheduled(
        fixed_rate=_RATE,
        lock=f"{_LOCK}-{lock}",
        retries=retries,
        retry_backoff="300ms",
        retry_backoff_max="600ms",
    )


@_retrying("always", retries=2)
def always_fails() -> None:
    _witnessed("always_fails", fails=True)


@_retrying("once", retries=3)
def fails_once() -> None:
    fire = current_fire()
    _witnessed("fails_once", fails=fire is not None and fire.attempt == 1)
