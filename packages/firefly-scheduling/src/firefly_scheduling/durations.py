"""`parse_duration`: every way a task may spell a length of time, read into seconds.

Accepted forms:

* a unit suffix: `250ms`, `30s`, `5m`, `1h`, `2d` (a decimal number is fine: `1.5h`);
* a bare number of seconds, as text (`90`, `1.5`) or as an int or float;
* an ISO-8601 duration with fixed-length parts only: weeks, days, hours, minutes and
  seconds (`PT5M`, `PT1H30M`, `P1D`, `P1DT2H`, `PT0.5S`, `P2W`);
* a `datetime.timedelta`.

Surrounding whitespace is ignored. Everything else raises `DurationError`, quoting
the text and where it came from: empty text, unknown units, a sign, zero, NaN,
infinity, booleans, and ISO years or months (they have no fixed length, so a
"one month" interval would silently drift between 28 and 31 days).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

from firefly_scheduling.errors import DurationError

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_WITH_UNIT = re.compile(rf"({_NUMBER})\s*(ms|s|m|h|d)?")
_ISO = re.compile(
    rf"P(?:(?P<weeks>{_NUMBER})W)?(?:(?P<days>{_NUMBER})D)?"
    rf"(?:T(?:(?P<hours>{_NUMBER})H)?(?:(?P<minutes>{_NUMBER})M)?(?:(?P<seconds>{_NUMBER})S)?)?"
)
_ISO_SECONDS = {
    "weeks": 604800.0,
    "days": 86400.0,
    "hours": 3600.0,
    "minutes": 60.0,
    "seconds": 1.0,
}
# Years, or months in the date part (before any T): calendar lengths, refused on purpose.
_ISO_CALENDAR_PART = re.compile(r"P[^T]*[YM]")

ACCEPTED_FORMS = "250ms, 30s, 5m, 1h, 2d, a number of seconds, or ISO-8601 such as PT5M or P1D"


def parse_duration(value: str | float | timedelta, *, source: str = "duration") -> float:
    """Return `value` as a positive, finite number of seconds.

    `source` names where the value came from (a task target and argument, a settings
    key) and starts every error message, so a refusal at boot says what to fix.
    """
    if isinstance(value, bool):
        raise DurationError(f"{source}: {value!r} is not a duration; use {ACCEPTED_FORMS}")
    if isinstance(value, timedelta):
        return _positive(value.total_seconds(), value, source)
    if isinstance(value, int | float):
        return _positive(float(value), value, source)
    if isinstance(value, str):
        return _positive(_parse_text(value, source), value, source)
    raise DurationError(
        f"{source}: expected text, a number of seconds or a timedelta, "
        f"got {type(value).__name__}: {value!r}"
    )


def _parse_text(value: str, source: str) -> float:
    text = value.strip()
    match = _WITH_UNIT.fullmatch(text)
    if match is not None:
        return float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]
    if text.startswith("P"):
        return _parse_iso(text, value, source)
    if text.startswith(("-", "+")):
        raise DurationError(f"{source}: a duration must be positive, got {value!r}")
    raise DurationError(f"{source}: cannot read {value!r} as a duration; use {ACCEPTED_FORMS}")


def _parse_iso(text: str, value: str, source: str) -> float:
    if _ISO_CALENDAR_PART.match(text):
        raise DurationError(
            f"{source}: {value!r} uses years or months, which have no fixed length; "
            "use days or weeks (P30D, P4W) or a cron expression instead"
        )
    match = _ISO.fullmatch(text)
    if match is None or text.endswith("T") or not any(match.groupdict().values()):
        raise DurationError(
            f"{source}: {value!r} is not an ISO-8601 duration with at least one part; "
            f"use {ACCEPTED_FORMS}"
        )
    return sum(
        float(amount) * _ISO_SECONDS[part]
        for part, amount in match.groupdict().items()
        if amount is not None
    )


def _positive(seconds: float, value: object, source: str) -> float:
    if math.isnan(seconds) or math.isinf(seconds):
        raise DurationError(f"{source}: a duration must be finite, got {value!r}")
    if seconds <= 0:
        raise DurationError(f"{source}: a duration must be greater than zero, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """A short human form for listings: `250ms`, `7s`, `1m30s`, `1h30m`, `2d`."""
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    parts = []
    remainder = seconds
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        whole = int(remainder // size)
        if whole:
            parts.append(f"{whole}{unit}")
            remainder -= whole * size
    if remainder or not parts:
        parts.append(f"{round(remainder, 6):g}s")
    return "".join(parts)
