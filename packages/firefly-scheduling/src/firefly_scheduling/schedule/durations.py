"""`parse_duration` and `format_duration`: every way to spell a length of time, both ways.

Accepted forms (the grammar is in docs/scheduling.md):

* one or more parts `<number><unit>`, units from the largest to the smallest, each at
  most once: `250ms`, `30s`, `5m`, `1h`, `2d`, `1h30m`, `2m30s`, `1d2h`, `1m30s500ms`.
  Units are `d`, `h`, `m`, `s` and `ms`; a number is ASCII digits with an optional
  decimal part (`1.5h`, `.5s`); spaces may separate a number from its unit and one
  part from the next (`1h 30m`);
* a bare number of seconds, as text (`90`, `1.5`) or as an int or float;
* an ISO-8601 duration with fixed-length parts only: weeks, days, hours, minutes and
  seconds (`PT5M`, `PT1H30M`, `P1D`, `P1DT2H`, `PT0.5S`, `P2W`);
* a cadence as `firefly-scheduling schedule --host tick` prints it (`Cadence.describe`):
  `every second`, `every N seconds`, `every minute`, `every N minutes`, `hourly`,
  `daily`, `weekly` (any case), so what a listing shows can be written back as is;
* a `datetime.timedelta`.

Every duration lies between `MIN_DURATION_SECONDS` (1 ms) and `MAX_DURATION_SECONDS`
(366 days), both included. The floor stops a task from spinning a CPU; the ceiling is
far below what any later computation overflows on (a fire instant a period ahead,
`timedelta`, croniter and APScheduler's datetimes, a lease's expiry on the lock server
including memcached's absolute times that end in 2038), so a value accepted at boot
never fails on the fifth tick.

Surrounding whitespace is ignored. Everything else raises `DurationError`, quoting the
text and where it came from: empty text, unknown units, units out of order, a sign,
zero, NaN, infinity, booleans, non-ASCII digits, and ISO years or months (they have no
fixed length, so a "one month" interval would silently drift between 28 and 31 days).

Text is read with exact decimal arithmetic and rounded to a float once, so
`format_duration` followed by `parse_duration` gives back the very same float.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from decimal import Decimal
from typing import Final

from firefly_scheduling.errors import DurationError

#: The shortest duration accepted: one millisecond.
MIN_DURATION_SECONDS: Final = 0.001
#: The longest duration accepted: 366 days (a leap year), in seconds.
MAX_DURATION_SECONDS: Final = 366 * 86400.0

_UNIT_SECONDS: Final[dict[str, Decimal]] = {
    "d": Decimal(86400),
    "h": Decimal(3600),
    "m": Decimal(60),
    "s": Decimal(1),
    "ms": Decimal("0.001"),
}
_MIN: Final = Decimal("0.001")
_MAX: Final = Decimal(366 * 86400)
_FLOAT_BOUNDS: Final = (MIN_DURATION_SECONDS, MAX_DURATION_SECONDS)

# re.ASCII: `\s` and the digit classes must not accept other scripts' digits ('٣s').
_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_BARE_NUMBER = re.compile(_NUMBER, re.ASCII)
# Each unit at most once, largest first; `m` is minutes only when no `s` follows it.
_COMPOUND = re.compile(
    rf"(?:(?P<d>{_NUMBER})\s*d\s*)?(?:(?P<h>{_NUMBER})\s*h\s*)?"
    rf"(?:(?P<m>{_NUMBER})\s*m(?!s)\s*)?(?:(?P<s>{_NUMBER})\s*s\s*)?"
    rf"(?:(?P<ms>{_NUMBER})\s*ms)?",
    re.ASCII,
)
# Parts in any order, only to explain a refusal of `30m1h` or `1m1m`.
_ANY_PARTS = re.compile(rf"(?:{_NUMBER}\s*(?:ms|s|m|h|d)\s*)+", re.ASCII)
_ISO = re.compile(
    rf"P(?:(?P<weeks>{_NUMBER})W)?(?:(?P<days>{_NUMBER})D)?"
    rf"(?:T(?:(?P<hours>{_NUMBER})H)?(?:(?P<minutes>{_NUMBER})M)?(?:(?P<seconds>{_NUMBER})S)?)?",
    re.ASCII,
)
#: The cadence phrases without a number, and those with one (`every 5 minutes`).
_PHRASES: Final[dict[str, Decimal]] = {
    "every second": Decimal(1),
    "every minute": Decimal(60),
    "hourly": Decimal(3600),
    "daily": Decimal(86400),
    "weekly": Decimal(604800),
}
_EVERY = re.compile(r"every\s+(?P<amount>[0-9]+)\s+(?P<unit>seconds|minutes)", re.ASCII)
_EVERY_UNIT: Final[dict[str, Decimal]] = {"seconds": Decimal(1), "minutes": Decimal(60)}
_ISO_SECONDS: Final[dict[str, Decimal]] = {
    "weeks": Decimal(604800),
    "days": Decimal(86400),
    "hours": Decimal(3600),
    "minutes": Decimal(60),
    "seconds": Decimal(1),
}
# Years, or months in the date part (before any T): calendar lengths, refused on purpose.
_ISO_CALENDAR_PART = re.compile(r"P[^T]*[YM]")
# Longer values are shown by their start and length: a message must stay readable.
_LONGEST_SHOWN = 60

ACCEPTED_FORMS = (
    "250ms, 30s, 5m, 1h, 2d, compounds such as 1h30m or 2m30s, a number of seconds, "
    "ISO-8601 such as PT5M or P1D, or a cadence such as 'every 5 minutes' or 'hourly'"
)
BOUNDS = "from 1ms to 366d"


def parse_duration(value: str | float | timedelta, *, source: str = "duration") -> float:
    """Return `value` as a number of seconds from 1 ms to 366 days, as a float.

    `source` names where the value came from (a task target and argument, a settings
    key) and starts every error message, so a refusal at boot says what to fix.
    """
    if isinstance(value, bool):
        raise DurationError(f"{source}: {value!r} is not a duration; use {ACCEPTED_FORMS}")
    if isinstance(value, timedelta):
        return _bounded(value.total_seconds(), value, source)
    if isinstance(value, int | float):
        return _bounded(value, value, source)
    if isinstance(value, str):
        return _bounded(_parse_text(value, source), value, source)
    raise DurationError(
        f"{source}: expected text, a number of seconds or a timedelta, "
        f"got {type(value).__name__}: {_shown(value)}"
    )


def _parse_text(value: str, source: str) -> Decimal:
    text = value.strip()
    if _BARE_NUMBER.fullmatch(text):
        return Decimal(text)
    match = _COMPOUND.fullmatch(text)
    if text and match is not None:
        return _total(match.groupdict(), _UNIT_SECONDS)
    phrase = " ".join(text.lower().split())
    if phrase in _PHRASES:
        return _PHRASES[phrase]
    every = _EVERY.fullmatch(phrase)
    if every is not None:
        return Decimal(every["amount"]) * _EVERY_UNIT[every["unit"]]
    if any(character.isdigit() and not character.isascii() for character in text):
        raise DurationError(
            f"{source}: cannot read {_shown(value)} as a duration: write numbers with the "
            "ASCII digits 0-9"
        )
    if text.startswith("P"):
        return _parse_iso(text, value, source)
    if text.startswith(("-", "+")):
        raise DurationError(f"{source}: a duration must be positive, got {_shown(value)}")
    if _ANY_PARTS.fullmatch(text):
        raise DurationError(
            f"{source}: cannot read {_shown(value)} as a duration: the parts of a compound "
            "duration go from the largest unit to the smallest (d, h, m, s, ms), each unit "
            "at most once, as in 1h30m or 2m30s"
        )
    raise DurationError(
        f"{source}: cannot read {_shown(value)} as a duration; use {ACCEPTED_FORMS}"
    )


def _parse_iso(text: str, value: str, source: str) -> Decimal:
    if _ISO_CALENDAR_PART.match(text):
        raise DurationError(
            f"{source}: {_shown(value)} uses years or months, which have no fixed length; "
            "use days or weeks (P30D, P4W) or a cron expression instead"
        )
    match = _ISO.fullmatch(text)
    if match is None or text.endswith("T") or not any(match.groupdict().values()):
        raise DurationError(
            f"{source}: {_shown(value)} is not an ISO-8601 duration with at least one part; "
            f"use {ACCEPTED_FORMS}"
        )
    return _total(match.groupdict(), _ISO_SECONDS)


def _total(amounts: dict[str, str | None], unit_seconds: dict[str, Decimal]) -> Decimal:
    """The exact sum of each given amount times its unit's length in seconds."""
    total = Decimal(0)
    for unit, amount in amounts.items():
        if amount is not None:
            total += Decimal(amount) * unit_seconds[unit]
    return total


def _bounded(seconds: Decimal | float, value: object, source: str) -> float:
    """`seconds` as a float, once it is known to lie within the bounds.

    Compared before any conversion: an int such as 10**400 has no float, and exact
    text is compared exactly.
    """
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise DurationError(f"{source}: a duration must be finite, got {_shown(value)}")
    if seconds <= 0:
        raise DurationError(f"{source}: a duration must be greater than zero, got {_shown(value)}")
    # Text is exact, so it meets the exact bounds; numbers meet the float ones.
    shortest, longest = (_MIN, _MAX) if isinstance(seconds, Decimal) else _FLOAT_BOUNDS
    if seconds < shortest:
        raise DurationError(
            f"{source}: {_shown(value)} is shorter than 1ms, the shortest duration; a rate "
            "or delay below it would only keep a CPU busy"
        )
    if seconds > longest:
        raise DurationError(
            f"{source}: {_shown(value)} is longer than the longest duration, 366d "
            f"({MAX_DURATION_SECONDS:.0f} s); use a cron expression for a yearly task"
        )
    return float(seconds)


def _shown(value: object) -> str:
    shown = repr(value)
    if len(shown) <= _LONGEST_SHOWN:
        return shown
    return f"{shown[:20]}... ({len(shown)} characters)"


def format_duration(seconds: float) -> str:
    """The short form of `seconds` for listings: `250ms`, `7s`, `1m30s`, `1h30m`, `2d`.

    `parse_duration` reads the result back to the very same float: the value is taken
    from its shortest exact decimal spelling (`repr`) and split without rounding. Only
    values `parse_duration` can return are accepted (1 ms to 366 days), so everything
    printed parses; anything else is a `ValueError`.
    """
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not MIN_DURATION_SECONDS <= seconds <= MAX_DURATION_SECONDS
    ):
        raise ValueError(f"format_duration needs a number of seconds {BOUNDS}, got {seconds!r}")
    exact = Decimal(repr(float(seconds)))
    parts: list[str] = []
    for unit in ("d", "h", "m"):
        whole, exact = divmod(exact, _UNIT_SECONDS[unit])
        if whole:
            parts.append(f"{whole:f}{unit}")
    if exact >= 1:
        parts.append(f"{_plain(exact)}s")
    elif exact:
        parts.append(f"{_plain(exact * 1000)}ms")
    return "".join(parts)


def format_elapsed(seconds: float) -> str:
    """A measured time (how long a run took) for listings, to the millisecond.

    Unlike a configured duration it may be anything: below 1 ms it shows `1ms`, and
    beyond 366 days `over 366d`. What it prints still parses as a duration.
    """
    if not math.isfinite(seconds):
        raise ValueError(f"format_elapsed needs a finite number of seconds, got {seconds!r}")
    if seconds > MAX_DURATION_SECONDS:
        return f"over {format_duration(MAX_DURATION_SECONDS)}"
    return format_duration(max(round(seconds, 3), MIN_DURATION_SECONDS))


def _plain(amount: Decimal) -> str:
    """`amount` in positional notation without trailing zeros: `1.5`, `30`, never `3E+1`."""
    text = f"{amount:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def readable_duration(seconds: float) -> str:
    """`format_duration` for messages: a span it cannot spell (beyond its bounds, or
    a computed one) is written in seconds instead of raising."""
    try:
        return format_duration(seconds)
    except ValueError:
        return f"{seconds:g}s"
