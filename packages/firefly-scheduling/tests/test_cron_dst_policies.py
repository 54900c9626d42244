"""`dst_gap` and `dst_fold`: the instants a cron fires at around a transition, per policy.

Europe/Paris, `30 2 * * *`: on 2026-03-29 clocks jump from 02:00 CET to 03:00 CEST
at 01:00Z, so 02:30 never happens; on 2026-10-25 they go back from 03:00 CEST to
02:00 CET at 01:00Z, so 02:30 happens twice (00:30Z and 01:30Z).
"""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest

from firefly_scheduling import ConfigurationError, ScheduledDescriptor, scheduled
from firefly_scheduling.schedule.cron import CronSchedule
from firefly_scheduling.schedule.dst import DST_FOLDS, DST_GAPS, DstPolicy
from firefly_scheduling.schedule.next_fire import cron_schedule_of
from firefly_scheduling.tasks.manifest_format import decode, encode
from firefly_scheduling.tasks.validation import validate_descriptor

SOURCE = "app.tasks:report"
SPRING_DAY = (datetime(2026, 3, 28, 22, tzinfo=UTC), datetime(2026, 3, 29, 22, tzinfo=UTC))
AUTUMN_DAY = (datetime(2026, 10, 24, 22, tzinfo=UTC), datetime(2026, 10, 25, 23, tzinfo=UTC))


def utc(*fields: int) -> datetime:
    return datetime(*fields, tzinfo=UTC)  # type: ignore[misc]


def paris(**policy: str) -> CronSchedule:
    return CronSchedule.parse("30 2 * * *", "Europe/Paris", source=SOURCE, **policy)


def fires(cron: CronSchedule, start: datetime, end: datetime) -> list[datetime]:
    """Every fire in `(start, end]`."""
    found = []
    instant = cron.next_after(start)
    while instant <= end:
        found.append(instant)
        instant = cron.next_after(instant)
    return found


def test_shift_fires_a_skipped_time_at_the_end_of_the_gap() -> None:
    assert fires(paris(dst_gap="shift"), *SPRING_DAY) == [utc(2026, 3, 29, 1)]
    assert utc(2026, 3, 29, 1).astimezone(paris().zone).strftime("%H:%M %Z") == "03:00 CEST"


def test_skip_does_not_fire_that_day() -> None:
    assert fires(paris(dst_gap="skip"), *SPRING_DAY) == []
    assert paris(dst_gap="skip").next_after(SPRING_DAY[0]) == utc(2026, 3, 30, 0, 30)


@pytest.mark.parametrize(
    ("fold", "expected"),
    [
        ("first", [utc(2026, 10, 25, 0, 30)]),
        ("last", [utc(2026, 10, 25, 1, 30)]),
        ("both", [utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30)]),
    ],
)
def test_a_repeated_time_fires_in_the_passes_the_fold_policy_names(
    fold: str, expected: list[datetime]
) -> None:
    assert fires(paris(dst_fold=fold), *AUTUMN_DAY) == expected


def test_fires_are_marked_by_how_they_met_the_transition() -> None:
    assert paris().next_marked_after(SPRING_DAY[0]) == (utc(2026, 3, 29, 1), "shifted")
    both = paris(dst_fold="both")
    assert both.next_marked_after(AUTUMN_DAY[0]) == (utc(2026, 10, 25, 0, 30), "first")
    assert both.next_marked_after(utc(2026, 10, 25, 0, 30)) == (utc(2026, 10, 25, 1, 30), "last")
    assert both.next_marked_after(utc(2026, 10, 25, 1, 30)) == (utc(2026, 10, 26, 1, 30), None)


@pytest.mark.parametrize(
    ("expression", "gap", "fold"),
    [
        ("30 2 * * *", "shift", "first"),
        ("0 * * * *", "skip", "both"),
        ("*/15 * * * *", "skip", "both"),
    ],
)
def test_defaults_are_crons_own_rules(expression: str, gap: str, fold: str) -> None:
    default = CronSchedule.parse(expression, "Europe/Paris", source=SOURCE)
    explicit = CronSchedule.parse(
        expression, "Europe/Paris", source=SOURCE, dst_gap=gap, dst_fold=fold
    )
    assert default.dst == DstPolicy(gap, fold)  # type: ignore[arg-type]
    for window in (SPRING_DAY, AUTUMN_DAY):
        assert fires(default, *window) == fires(explicit, *window)


def test_an_hourly_task_may_opt_into_one_pass_and_the_gap_end() -> None:
    hourly = CronSchedule.parse(
        "0 * * * *", "Europe/Paris", source=SOURCE, dst_gap="shift", dst_fold="last"
    )
    local = [f.astimezone(hourly.zone).strftime("%H:%M%Z") for f in fires(hourly, *AUTUMN_DAY)]
    assert local[:4] == ["01:00CEST", "02:00CET", "03:00CET", "04:00CET"]  # no 02:00 CEST
    # 02:00 does not exist in spring: shifted onto 03:00, which fires once.
    spring = fires(hourly, utc(2026, 3, 28, 23, 30), utc(2026, 3, 29, 2, 30))
    assert spring == [utc(2026, 3, 29, 0), utc(2026, 3, 29, 1), utc(2026, 3, 29, 2)]


def task_function() -> Any:
    namespace: dict[str, Any] = {"__name__": "app.tasks"}
    exec(textwrap.dedent("def report():\n    return 'ran'\n"), namespace)
    return namespace["report"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"dst_gap": "forward"},
            "app.tasks:report: dst_gap='forward' is not one of 'shift', 'skip'",
        ),
        ({"dst_fold": "twice"}, "app.tasks:report: dst_fold='twice' is not one of 'first'"),
        ({"dst_fold": 1}, "app.tasks:report: dst_fold=1 is not one of"),
        ({"dst_gap": "SHIFT"}, "dst_gap='SHIFT' is not one of"),
    ],
)
def test_bad_values_are_refused_naming_the_task_and_the_value(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        scheduled(cron="30 2 * * *", zone="Europe/Paris", **arguments)(task_function())
    assert message in str(raised.value)
    descriptor = ScheduledDescriptor(target=SOURCE, cron="30 2 * * *", **arguments)
    with pytest.raises(ConfigurationError, match=r"app\.tasks:report: dst_"):
        validate_descriptor(descriptor)


@pytest.mark.parametrize("name", ["dst_gap", "dst_fold"])
def test_an_interval_task_refuses_dst_policies(name: str) -> None:
    value = "skip" if name == "dst_gap" else "both"
    with pytest.raises(ConfigurationError) as raised:
        scheduled(fixed_rate="1h", **{name: value})(task_function())
    assert f"app.tasks:report: {name}={value!r} only applies to cron tasks" in str(raised.value)


def test_the_manifest_keeps_the_policies() -> None:
    descriptor = validate_descriptor(
        ScheduledDescriptor(
            target=SOURCE, cron="30 2 * * *", zone="Europe/Paris", dst_gap="skip", dst_fold="both"
        )
    )
    _, (loaded,) = decode(json.loads(encode([descriptor], ["app"])))
    assert loaded == descriptor
    assert cron_schedule_of(loaded).dst == DstPolicy("skip", "both")


@pytest.mark.parametrize("expression", ["30 2 * * *", "*/20 * * * *"])
@pytest.mark.parametrize(("gap", "fold"), [(g, f) for g in DST_GAPS for f in DST_FOLDS])
def test_the_fire_a_wake_up_belongs_to_follows_the_policy(
    expression: str, gap: str, fold: str
) -> None:
    """`latest_at_or_before` (how a host names the fire it woke for) agrees with `next_after`."""
    cron = CronSchedule.parse(expression, "Europe/Paris", source=SOURCE, dst_gap=gap, dst_fold=fold)
    for window in (SPRING_DAY, AUTUMN_DAY):
        found = fires(cron, *window)
        for fire, following in pairwise(found):
            assert cron.latest_at_or_before(fire) == fire
            assert cron.latest_at_or_before(following - timedelta(seconds=1)) == fire
