"""Aware-datetime checks shared by the cadence and cron code."""

from __future__ import annotations

from datetime import UTC, datetime


def as_utc(instant: datetime) -> datetime:
    """`instant` converted to UTC; a naive datetime is refused, never guessed at.

    A naive value would be read in the host's local zone, and two nodes configured
    differently would then disagree about which fire is due. An instant already in
    `UTC` is returned as it is: a fire's instant passes here several times on its
    way, and the conversion's new object each time was 5 % of a winning node's CPU.
    """
    if instant.tzinfo is UTC:
        return instant
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"expected an aware datetime, got the naive {instant.isoformat()}")
    return instant.astimezone(UTC)
