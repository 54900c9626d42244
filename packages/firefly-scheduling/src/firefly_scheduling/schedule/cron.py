"""`CronSchedule`: a standard 5-field crontab expression, evaluated in an IANA zone.

Parsing and field matching are croniter's; this module pins the semantics around it:

* Exactly five fields (minute hour day-of-month month day-of-week), with numbers,
  `*`, `,`, `-`, `/` and English month/day names. Day-of-week 0 and 7 are both
  Sunday. Day-of-month and day-of-week, when both restricted, match when either
  does (Vixie cron). Seconds/years columns, `@reboot` and croniter's non-standard
  extensions (`L`, `W`, `#`, `?`, random `R` and hashed `H`) are refused: the
  last two would make nodes disagree about when a task fires.
* Macros: `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`,
  `@hourly`.

Daylight-saving time. The expression is read against the zone's wall clock; what
happens to a wall-clock time a transition skips or repeats is the task's `DstPolicy`
(`dst_gap=`, `dst_fold=`; see `dst`). By default it is cron's on a machine set to
that zone (Vixie cron's rules):

* A task whose hour field is `*` ("hourly or more often") fires at every real
  minute whose wall-clock reading matches. When clocks go back it fires in both
  passes of the repeated hour; when they go forward the skipped wall-clock
  minutes never existed, so nothing fires for them.
* Any other task (fixed hours, e.g. `30 2 * * *`) fires once per matching
  wall-clock time: at the first occurrence of a repeated time, and, for a time
  inside a spring-forward gap, at the first instant after the gap (02:30 in
  Europe/Paris on the last Sunday of March runs at 03:00 CEST, once).

All instants in and out are aware datetimes; results are in UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.schedule.dst import DstMark, DstPolicy, dst_mark
from firefly_scheduling.schedule.instants import as_utc

if TYPE_CHECKING:
    from croniter import croniter as Croniter

MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTH_NAMES = frozenset(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
)
_DAY_NAMES = frozenset(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])
_NUMERIC_FIELD = re.compile(r"[0-9*,/\-]+")
_NAMED_FIELD = re.compile(r"[0-9A-Za-z*,/\-]+")
_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
#: The values each field takes (day-of-week 7 is Sunday, as 0 is).
_FIELD_RANGES = {
    "minute": (0, 59),
    "hour": (0, 23),
    "day-of-month": (1, 31),
    "month": (1, 12),
    "day-of-week": (0, 7),
}
#: A field item's values: the part before any `/step` (a step is a count, not a value).
_VALUES = re.compile(r"[0-9]+")
# Wide enough to contain any repeated wall-clock hour (Lord Howe's 30 minutes up to
# historical double summer time's 2 hours).
_DST_LOOKAROUND = timedelta(hours=3)
# A valid expression fires at least once in a few years; the bound only stops a
# bug from looping, it is never reached by a parsed expression.
_MAX_CANDIDATES = 100_000
_MINUTE = timedelta(minutes=1)
_UTC_ZONE = ZoneInfo("UTC")


def resolve_zone(name: str | None, *, source: str) -> ZoneInfo:
    """The IANA zone `name` (None means UTC), or a `ConfigurationError` naming `source`."""
    if name is None:
        return _UTC_ZONE
    if not isinstance(name, str):
        raise ConfigurationError(f"{source}: zone must be an IANA name such as 'Europe/Paris'")
    try:
        return _zone(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ConfigurationError(
            f"{source}: unknown time zone {name!r}; use an IANA name such as 'Europe/Paris' "
            "or 'UTC'"
        ) from err


@lru_cache(maxsize=512)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


@dataclass(frozen=True)
class CronSchedule:
    """A parsed cron expression bound to a zone; build it with `CronSchedule.parse`."""

    #: The expression as written (surrounding whitespace removed).
    expression: str
    zone: ZoneInfo
    #: The 5-field form croniter evaluates (a macro expanded).
    fields: str = field(repr=False)
    #: Whether the hour field is `*`, which selects the default DST policy (see `dst`).
    every_hour: bool = field(repr=False)
    #: What fires for wall-clock times a transition skips or repeats.
    dst: DstPolicy = field(default=DstPolicy("shift", "first"))

    @classmethod
    def parse(
        cls,
        expression: str,
        zone: str | None = None,
        *,
        source: str,
        dst_gap: str | None = None,
        dst_fold: str | None = None,
    ) -> CronSchedule:
        """Parse and check `expression` in `zone`; errors name `source` and the expression.

        `dst_gap`/`dst_fold` None take the default policy for the expression (see `dst`).
        """
        tz = resolve_zone(zone, source=source)
        if not isinstance(expression, str):
            raise ConfigurationError(
                f"{source}: cron must be a 5-field crontab string, got {expression!r}"
            )
        try:
            parsed = _parse(expression.strip(), tz)
        except _CronRefusal as refusal:
            raise ConfigurationError(f"{source}: cron {expression!r} {refusal}") from None
        policy = DstPolicy.of(dst_gap, dst_fold, every_hour=parsed.every_hour, source=source)
        return parsed if policy == parsed.dst else replace(parsed, dst=policy)

    @property
    def zone_name(self) -> str:
        """The zone's IANA key (`UTC` when none was given)."""
        return self.zone.key

    def next_after(self, instant: datetime) -> datetime:
        """The first fire strictly after `instant`, as an aware UTC datetime."""
        return self.next_marked_after(instant)[0]

    def next_marked_after(self, instant: datetime) -> tuple[datetime, DstMark | None]:
        """`next_after`, with how that fire met a DST transition (None: it did not)."""
        after = as_utc(instant)
        local = after.astimezone(self.zone)
        start = local.replace(tzinfo=None)
        # Near a change of offset, wall-clock times up to the size of the change before
        # `start` may still have a second occurrence after `instant`.
        start -= self._offset_change_near(after)
        candidates = croniter_for(self.fields, start)
        best: datetime | None = None
        best_wall_clock = start
        for _ in range(_MAX_CANDIDATES):
            wall_clock = candidates.get_next(datetime)
            instants = self._instants_of(wall_clock)
            if best is not None and instants and instants[0] >= best:
                return best, dst_mark(best_wall_clock, best, self.zone)
            for fire in instants:
                if fire > after and (best is None or fire < best):
                    best, best_wall_clock = fire, wall_clock
        raise RuntimeError(f"cron {self.expression!r} found no fire after {after.isoformat()}")

    def latest_at_or_before(self, instant: datetime) -> datetime:
        """The last fire at or before `instant`, as an aware UTC datetime, however far back.

        croniter walks the zone's wall clock backwards (`get_prev`) to the latest
        matching wall-clock time that fired (by the DST rules) at or before `instant`.
        Around a change of offset the wall clock and real time disagree on the order
        of two fires, so `next_after` then steps forward over any later fire up to
        `instant`. Cost: one backward step per matching wall-clock time examined,
        whatever the distance (a weekly, monthly or leap-day fire alike).
        """
        now = as_utc(instant)
        local = now.astimezone(self.zone).replace(tzinfo=None, second=0, microsecond=0)
        # get_prev returns times strictly before its start. Near a change of offset a
        # wall-clock time up to the size of the change after `local` may already have
        # fired (clocks went back), so the walk starts that much later.
        candidates = croniter_for(self.fields, local + _MINUTE + self._offset_change_near(now))
        for _ in range(_MAX_CANDIDATES):
            fired = [
                fire for fire in self._instants_of(candidates.get_prev(datetime)) if fire <= now
            ]
            if fired:
                latest = max(fired)
                following = self.next_after(latest)
                while following <= now:
                    latest, following = following, self.next_after(following)
                return latest
        raise RuntimeError(f"cron {self.expression!r} found no fire before {now.isoformat()}")

    def matches(self, minute: datetime) -> bool:
        """Whether the task fires at the UTC minute containing `minute`."""
        start = as_utc(minute).replace(second=0, microsecond=0)
        return self.next_after(start - _MINUTE) == start

    def describe(self) -> str:
        """The expression verbatim, with its zone when it is not UTC."""
        zone = self.zone_name
        return self.expression if zone == "UTC" else f"{self.expression} ({zone})"

    def _instants_of(self, wall_clock: datetime) -> tuple[datetime, ...]:
        """The UTC instants at which the naive local `wall_clock` fires (see `dst`)."""
        return self.dst.instants_of(wall_clock, self.zone)

    def _offset_change_near(self, instant: datetime) -> timedelta:
        """How far the zone's UTC offset moves within `_DST_LOOKAROUND` of `instant`."""
        offsets = [
            (instant + delta).astimezone(self.zone).utcoffset() or timedelta(0)
            for delta in (-_DST_LOOKAROUND, timedelta(0), _DST_LOOKAROUND)
        ]
        return max(offsets) - min(offsets)


class _CronRefusal(Exception):
    """Why an expression was refused, before the caller adds its source."""


def croniter_for(fields: str, start: datetime) -> Croniter:
    """A croniter over `fields` from `start`, croniter imported on first use.

    croniter (and dateutil, which it pulls in) costs more at import than the rest of
    the package; a deployment with interval tasks only never pays for it.
    """
    from croniter import croniter  # noqa: PLC0415 - lazily, see above

    return croniter(fields, start)


@lru_cache(maxsize=4096)
def _parse(expression: str, zone: ZoneInfo) -> CronSchedule:
    # Cached: boot validation parses the same few expressions for thousands of tasks.
    from croniter import CroniterBadDateError, CroniterError  # noqa: PLC0415 - lazily

    fields = _standard_fields(expression)
    try:
        parsed = croniter_for(fields, datetime(2000, 1, 1))
        parsed.get_next(datetime)
    except CroniterBadDateError as err:
        raise _CronRefusal("never fires (no such date, e.g. 30 February)") from err
    except CroniterError as err:
        raise _CronRefusal(f"is not a valid crontab expression ({err})") from err
    hours = parsed.expanded[1]
    every_hour = hours == ["*"] or len(hours) == 24
    return CronSchedule(
        expression=expression,
        zone=zone,
        fields=fields,
        every_hour=every_hour,
        dst=DstPolicy.of(None, None, every_hour=every_hour, source=expression),
    )


def _standard_fields(expression: str) -> str:
    if expression.startswith("@"):
        macro = expression.lower()
        if macro == "@reboot":
            raise _CronRefusal(
                "is not supported: a fleet has no single reboot; use initial_delay= or run "
                "the code at start-up"
            )
        if macro not in MACROS:
            raise _CronRefusal(f"is not a known macro; use one of {', '.join(MACROS)}")
        return MACROS[macro]
    parts = expression.split()
    if len(parts) != len(_FIELD_NAMES):
        raise _CronRefusal(
            f"has {len(parts)} fields; a crontab has exactly 5 (minute hour day-of-month "
            "month day-of-week), without seconds or years: use fixed_rate= for sub-minute "
            "intervals"
        )
    for name, part in zip(_FIELD_NAMES, parts, strict=True):
        _check_field(name, part)
    return " ".join(parts)


def _check_field(name: str, part: str) -> None:
    names = {"month": _MONTH_NAMES, "day-of-week": _DAY_NAMES}.get(name)
    allowed = _NAMED_FIELD if names else _NUMERIC_FIELD
    unknown_names = [
        word for word in re.findall(r"[A-Za-z]+", part) if word.lower() not in (names or ())
    ]
    if not allowed.fullmatch(part) or unknown_names:
        raise _CronRefusal(
            f"has a non-standard {name} field {part!r}: use numbers, '*', ',', '-', '/'"
            + (" and three-letter English names" if names else "")
        )
    low, high = _FIELD_RANGES[name]
    for item in part.split(","):
        for value in _VALUES.findall(item.partition("/")[0]):
            if not low <= int(value) <= high:
                raise _CronRefusal(
                    f"has a {name} field {part!r} where {int(value)} is out of range {low}-{high}"
                )
