"""Checks shared by every backend, so a bad name or TTL fails the same way everywhere."""

from __future__ import annotations

import math
from numbers import Real

MAX_LOCK_NAME_LENGTH = 255
#: Lock names starting with this are the library's own: fire claims (`firefly:fire:...`)
#: and probes. The lock port accepts them, since the library takes them through it;
#: a task's `lock=` is refused there (see `validation.py`), so no task can take, or be
#: blocked by, one of them.
RESERVED_LOCK_PREFIX = "firefly:"


def validate_lock_name(name: object, *, source: str = "lock name") -> str:
    """Return `name` unchanged, or raise `ValueError` naming what is wrong with it.

    Names are never truncated or normalised: two names that differ in any character,
    including case, are two locks on every backend.
    """
    if not isinstance(name, str):
        raise TypeError(f"{source} must be a str, got {type(name).__name__}: {name!r}")
    if not name:
        raise ValueError(f"{source} must not be empty")
    if len(name) > MAX_LOCK_NAME_LENGTH:
        raise ValueError(
            f"{source} is {len(name)} characters long; the limit is {MAX_LOCK_NAME_LENGTH} "
            f"and names are never truncated: {name[:40]!r}..."
        )
    if "\x00" in name:
        raise ValueError(f"{source} must not contain a NUL character: {name!r}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as err:
        # Lone surrogates cannot reach any server: refuse them once, here, for all backends.
        raise ValueError(f"{source} is not valid Unicode text ({err.reason}): {name!r}") from None
    return name


def validate_ttl(ttl_seconds: object, *, source: str = "ttl_seconds") -> float:
    """Return the TTL as a float, refusing zero, negative, NaN, infinite and non-numbers."""
    # A float, the runner's own value for every claim, skips the ABC check (slow).
    if type(ttl_seconds) is not float and (
        isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, Real)
    ):
        raise TypeError(f"{source} must be a number of seconds, got {ttl_seconds!r}")
    ttl = float(ttl_seconds)
    if not math.isfinite(ttl) or ttl <= 0:
        raise ValueError(f"{source} must be finite and > 0, got {ttl_seconds!r}")
    return ttl


def validate_wait(wait: object, *, source: str = "wait") -> float:
    """Return how long to wait, in seconds: 0 tries once, `math.inf` waits for ever.

    Refuses negative values, NaN and non-numbers, naming the value.
    """
    if isinstance(wait, bool) or not isinstance(wait, Real):
        raise TypeError(f"{source} must be a number of seconds, got {wait!r}")
    seconds = float(wait)
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"{source} must be >= 0 seconds (math.inf waits for ever), got {wait!r}")
    return seconds
