"""Daylight-saving policies: what a cron does with wall-clock times a transition skips or repeats.

A cron is read against its zone's wall clock, and a transition breaks the one-to-one
map between wall-clock times and instants. Two choices settle it, per task:

* `dst_gap` (clocks go forward, a wall-clock time never happens): `shift` fires at
  the first instant after the gap (02:30 in Europe/Paris on the last Sunday of
  March fires at 03:00 CEST); `skip` does not fire for it. Several skipped times
  shifted onto one instant, or onto a time that exists, fire once there.
* `dst_fold` (clocks go back, a wall-clock time happens twice): `first` fires in the
  first pass only, `last` in the second pass only, `both` in each.

Not given, a policy follows cron on a machine set to the zone (Vixie cron): a task
whose hour field is `*` runs on the real wall clock (`skip` and `both`); any other
task runs its times once (`shift` and `first`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeVar
from zoneinfo import ZoneInfo

from firefly_scheduling.errors import ConfigurationError

DstGap = Literal["shift", "skip"]
DstFold = Literal["first", "last", "both"]
#: How a fire relates to a transition: moved out of a gap, or in a repeated time's pass.
DstMark = Literal["shifted", "first", "last"]
DST_GAPS: tuple[DstGap, ...] = ("shift", "skip")
DST_FOLDS: tuple[DstFold, ...] = ("first", "last", "both")
_Choice = TypeVar("_Choice", bound=str)


@dataclass(frozen=True)
class DstPolicy:
    """The effective gap and fold policies of one cron task."""

    gap: DstGap
    fold: DstFold

    @classmethod
    def of(cls, gap: object, fold: object, *, every_hour: bool, source: str) -> DstPolicy:
        """The policy for the values given (None: the default, see the module doc).

        A value outside the choices is a `ConfigurationError` naming `source` and the value.
        """
        return cls(
            gap=_choice("dst_gap", gap, DST_GAPS, source) or ("skip" if every_hour else "shift"),
            fold=_choice("dst_fold", fold, DST_FOLDS, source)
            or ("both" if every_hour else "first"),
        )

    def instants_of(self, wall_clock: datetime, zone: ZoneInfo) -> tuple[datetime, ...]:
        """The UTC instants at which the naive `wall_clock` in `zone` fires, in order."""
        first, second = _readings(wall_clock, zone)
        if first == second:
            return (first,)
        if first < second:  # a repeated wall-clock time (clocks went back)
            return {"first": (first,), "last": (second,), "both": (first, second)}[self.fold]
        # A wall-clock time inside a gap (clocks went forward): PEP 495 maps fold=1
        # with the offset after the gap (earlier UTC) and fold=0 with the one before.
        return () if self.gap == "skip" else (gap_end(second, first, zone),)


def dst_mark(wall_clock: datetime, fire: datetime, zone: ZoneInfo) -> DstMark | None:
    """How the fire at `fire` of the naive `wall_clock` in `zone` met a transition, if it did."""
    first, second = _readings(wall_clock, zone)
    if first == second:
        return None
    if first < second:
        return "first" if fire == first else "last"
    return "shifted"


def gap_end(low: datetime, high: datetime, zone: ZoneInfo) -> datetime:
    """The first UTC instant in `(low, high]` at which `zone`'s new offset applies."""
    after = high.astimezone(zone).utcoffset()
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).utcoffset() == after:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


def _readings(wall_clock: datetime, zone: ZoneInfo) -> tuple[datetime, datetime]:
    """The UTC instants of `wall_clock` read with fold=0 and fold=1 (equal away from DST)."""
    return (
        wall_clock.replace(tzinfo=zone, fold=0).astimezone(UTC),
        wall_clock.replace(tzinfo=zone, fold=1).astimezone(UTC),
    )


def _choice(name: str, value: object, choices: tuple[_Choice, ...], source: str) -> _Choice | None:
    if value is None:
        return None
    for choice in choices:
        if value == choice and isinstance(value, str):
            return choice
    raise ConfigurationError(
        f"{source}: {name}={value!r} is not one of {', '.join(map(repr, choices))}"
    )
