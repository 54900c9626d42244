"""Retry backoff: how long after a failed run of a fire its next retry is due.

AWS's "full jitter": retry `k` (1 for the first) waits a delay drawn uniformly from

    [0, min(backoff_max, backoff * 2**(k-1)))

so that the retries of many failed fires spread out instead of arriving in waves.
The draw is derived, not random, as a fire's jitter offset is (`schedule.jitter`):

    delay = floor(h * C / 2**64) microseconds, in [0, C)

where `C` is the cap in whole microseconds and `h` the first 8 bytes (big-endian) of
the SHA-256 of `"<target>|<instant in UTC, ISO 8601>|retry <k>"`. Integer arithmetic
only, no `random`, no `hash()`, no local zone: every node, and a node that restarts,
computes the same delay for the same (task, fire, retry).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from firefly_scheduling.schedule.instants import as_utc

_HASH_SPAN = 1 << 64
#: The defaults of `retry_backoff=` and `retry_backoff_max=`, in seconds.
DEFAULT_RETRY_BACKOFF_SECONDS = 10.0
DEFAULT_RETRY_BACKOFF_MAX_SECONDS = 600.0


def backoff_cap(retry: int, backoff: float, backoff_max: float) -> float:
    """The upper bound (exclusive) of retry `retry`'s delay, in seconds:
    `min(backoff_max, backoff * 2**(retry-1))`."""
    if retry < 1:
        raise ValueError(f"a retry is numbered from 1, got {retry!r}")
    # 2**(retry-1) grows past any float cap quickly: stop doubling once past it.
    cap = backoff
    for _ in range(retry - 1):
        if cap >= backoff_max:
            break
        cap *= 2
    return min(backoff_max, cap)


def retry_delay(
    target: str, instant: datetime, retry: int, *, backoff: float, backoff_max: float
) -> timedelta:
    """The delay of retry `retry` of the fire of `target` at `instant` (aware).

    In `[0, backoff_cap(retry, backoff, backoff_max))`, to the microsecond; the same
    on every node.
    """
    span = round(backoff_cap(retry, backoff, backoff_max) * 1_000_000)
    if span <= 0:
        raise ValueError(f"{target}: a retry backoff must be positive, got {backoff!r}")
    key = f"{target}|{as_utc(instant).isoformat()}|retry {retry}".encode()
    drawn = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
    return timedelta(microseconds=drawn * span // _HASH_SPAN)
