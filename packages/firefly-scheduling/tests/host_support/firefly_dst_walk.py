"""Walk every UTC-offset change of IANA zones and check each DST policy's fires against an oracle.

Run as a script (the property test runs it in processes whose `TZ` differs) it prints
one JSON object: the counts walked, the duplicate and missing fires found, and a
digest of every instant computed, so that two processes can be compared.

Transitions are found by sampling each zone's UTC offset weekly from 1970 to 2038
and bisecting each change to the second. The schedule is evaluated only in a
window around each transition (its size plus two hours either side), and zones
whose offset history is identical over the period are computed once.

The oracle does not use PEP 495 folds: it reads the offset in force at an instant
from the transitions found, and takes a wall-clock time `w` to happen at each
instant `w - offset` whose offset in force is that offset (none: in a gap; two: in
a fold). It then applies the policies as `firefly_scheduling.schedule.dst` states
them. A fire the oracle does not expect counts as a duplicate; an expected one
that does not come, as missing.
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import zoneinfo
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from firefly_scheduling.schedule.cron import CronSchedule, croniter_for
from firefly_scheduling.schedule.dst import DST_FOLDS, DST_GAPS

START = int(datetime(1970, 1, 1, tzinfo=UTC).timestamp())
END = int(datetime(2038, 1, 1, tzinfo=UTC).timestamp())
_WEEK = 7 * 86_400
_MARGIN = 7_200
_EPOCH = datetime(1970, 1, 1)


#: A UTC range around one or more offset changes, and those changes.
Window = tuple[int, int, list[tuple[int, int, int]]]


@dataclass(frozen=True)
class OffsetHistory:
    """A zone's offset at START and every change of it until END (seconds since the epoch)."""

    initial: int
    #: (instant of the change, offset before, offset after)
    changes: tuple[tuple[int, int, int], ...]

    def offset_at(self, instant: int) -> int:
        index = bisect.bisect_right(self._instants, instant)
        return self.initial if index == 0 else self.changes[index - 1][2]

    @property
    def _instants(self) -> list[int]:
        return [change[0] for change in self.changes]


def offset_history(zone: zoneinfo.ZoneInfo) -> OffsetHistory:
    """Sample weekly, bisect each change to the second."""

    def offset(instant: int) -> int:
        reading = datetime.fromtimestamp(instant, zone).utcoffset()
        return int(reading.total_seconds()) if reading is not None else 0

    initial = previous = offset(START)
    changes = []
    for sample in range(START + _WEEK, END + _WEEK, _WEEK):
        current = offset(sample)
        if current != previous:
            low, high = sample - _WEEK, sample
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if offset(middle) == previous else (low, middle)
            changes.append((high, previous, current))
            previous = current
    return OffsetHistory(initial, tuple(changes))


@dataclass
class Tally:
    """What a walk covered and found."""

    zones: int = 0
    distinct_histories: int = 0
    transitions: int = 0
    windows: int = 0
    slots: dict[str, int] = field(default_factory=lambda: {"normal": 0, "gap": 0, "fold": 0})
    fires: int = 0
    duplicates: int = 0
    missing: int = 0
    examples: list[str] = field(default_factory=list)
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)

    def report(self) -> dict[str, object]:
        return {
            "zones": self.zones,
            "distinct_histories": self.distinct_histories,
            "transitions": self.transitions,
            "windows": self.windows,
            "slots": self.slots,
            "fires": self.fires,
            "duplicates": self.duplicates,
            "missing": self.missing,
            "examples": self.examples[:5],
            "digest": self.digest.hexdigest(),
        }


def windows(history: OffsetHistory) -> Iterator[Window]:
    """UTC windows around the changes (overlapping ones merged), with the changes in each."""
    current: list[tuple[int, int, int]] = []
    low = high = 0
    for change in history.changes:
        size = abs(change[2] - change[1])
        start, end = change[0] - size - _MARGIN, change[0] + size + _MARGIN
        if current and start <= high:
            current.append(change)
            high = max(high, end)
            continue
        if current:
            yield low, high, current
        current, low, high = [change], start, end
    if current:
        yield low, high, current


#: A wall-clock time the cron matches: its kind, the instants it happens at, and the
#: changes whose jump forward passed over it (a gap's end, for `shift`).
Slot = tuple[str, list[int], list[int]]


def slots_in(fields: str, history: OffsetHistory, window: Window) -> list[Slot]:
    """The oracle's reading of every matching wall-clock time around the window."""
    low, high, changes = window
    offsets = sorted({history.offset_at(low)} | {change[2] for change in changes})
    wall = croniter_for(fields, _EPOCH + timedelta(seconds=low + offsets[0] - 60))
    slots: list[Slot] = []
    while True:
        local = int((wall.get_next(datetime) - _EPOCH).total_seconds())
        if local > high + offsets[-1]:
            return slots
        happens = sorted(local - o for o in offsets if history.offset_at(local - o) == o)
        kind = "normal" if len(happens) == 1 else "gap" if not happens else "fold"
        ends = [t for t, before, after in changes if t + before <= local < t + after]
        if low <= (happens or ends)[0] <= high:
            slots.append((kind, happens, ends))


def expected_fires(slots: list[Slot], gap: str, fold: str) -> list[int]:
    """The instants at which the policy says the slots fire."""
    fires: set[int] = set()
    for kind, happens, ends in slots:
        if kind == "normal":
            fires.add(happens[0])
        elif kind == "fold":
            fires.update({"first": happens[:1], "last": happens[-1:], "both": happens}[fold])
        elif gap == "shift":
            fires.update(ends)
    return sorted(fires)


def actual_fires(cron: CronSchedule, low: int, high: int) -> list[int]:
    found = []
    instant = cron.next_after(datetime.fromtimestamp(low - 1, UTC))
    while (seconds := int(instant.timestamp())) <= high:
        found.append(seconds)
        instant = cron.next_after(instant)
    return found


def walk(
    zone_names: Iterable[str],
    expressions: Iterable[str],
    *,
    group: bool,
    since: datetime | None = None,
) -> Tally:
    """Check every policy that applies in every window of every zone, for each expression.

    `since` leaves out the windows that open before it.

    With `group`, a window (its bounds, the changes in it and the offset it opens
    with) met again in another zone is evaluated once, in the first zone it was met in.
    """
    tally = Tally()
    histories: dict[OffsetHistory, list[str]] = {}
    for name in sorted(zone_names):
        tally.zones += 1
        history = offset_history(zoneinfo.ZoneInfo(name))
        tally.transitions += len(history.changes)
        histories.setdefault(history, []).append(name)
    tally.distinct_histories = len(histories)
    for expression in expressions:
        seen: set[tuple[object, ...]] = set()
        for history, names in histories.items():
            for window in windows(history):
                if since is not None and window[0] < since.timestamp():
                    continue
                key = (window[0], window[1], tuple(window[2]), history.offset_at(window[0]))
                if group and key in seen:
                    continue
                seen.add(key)
                for name in names[:1] if group else names:
                    _check_window(expression, name, history, window, tally)
    return tally


def _check_window(
    expression: str, name: str, history: OffsetHistory, window: Window, tally: Tally
) -> None:
    tally.windows += 1
    low, high, changes = window
    gaps = DST_GAPS if any(after > before for _, before, after in changes) else ("shift",)
    folds = DST_FOLDS if any(after < before for _, before, after in changes) else ("first",)
    slots: list[Slot] | None = None
    for gap in gaps:
        for fold in folds:
            cron = CronSchedule.parse(expression, name, source=name, dst_gap=gap, dst_fold=fold)
            if slots is None:
                slots = slots_in(cron.fields, history, window)
                for kind, _, _ in slots:
                    tally.slots[kind] += 1
            expected = expected_fires(slots, gap, fold)
            actual = actual_fires(cron, low, high)
            tally.fires += len(actual)
            extra, absent = set(actual) - set(expected), set(expected) - set(actual)
            tally.duplicates += len(extra) + len(actual) - len(set(actual))
            tally.missing += len(absent)
            if extra or absent:
                tally.examples.append(
                    f"{name} {expression!r} {gap}/{fold}: extra {sorted(extra)} "
                    f"missing {sorted(absent)}"
                )
            line = f"{low}|{expression}|{gap}|{fold}|{','.join(map(str, actual))}\n"
            tally.digest.update(line.encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--zone", action="append", help="a zone (default: every IANA zone)")
    parser.add_argument("--cron", action="append", required=True, help="an expression")
    parser.add_argument("--each-zone", action="store_true", help="no grouping of equal zones")
    arguments = parser.parse_args()
    zones = arguments.zone or zoneinfo.available_timezones()
    tally = walk(zones, arguments.cron, group=not arguments.each_zone)
    print(json.dumps(tally.report()))


if __name__ == "__main__":
    main()
