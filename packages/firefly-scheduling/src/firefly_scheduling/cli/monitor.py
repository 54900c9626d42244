"""`firefly-scheduling monitor`: a health check for pagers, from the run history.

It exits 1, printing one line per problem, when a locked task

* has no success within `max(2 * its period, 120 s)`: twice the fixed rate or
  delay, or for a cron the time since the fire two before its latest one (for a
  regular cron that is twice its period, and a weekday-only cron is not flagged
  on Monday morning for the weekend); or
* failed, timed out (ran past its `timeout=`), or had a run expire (its node died
  and nobody adopted it), in the last 24 hours (`--failures-within`), and has not
  succeeded at a later fire since.

A task is judged only once a fire was due since it was first seen (by `monitor`,
kept in the anchor store, or by the run history's newest record; see
`first_sightings`), and that fire is at least two minutes old: a freshly deployed
daily task is not red before its first fire. Otherwise it exits 0.

Unlocked tasks are not checked: they run on every node and are not recorded. "No
success" is measured by the fire's instant, so a run that is still going does not
count as a success yet.

`--json` prints one object per locked task instead, with the same exit status:
`{"target", "healthy", "judged", "first_seen", "first_due", "last_success",
"problems": [reason, ...]}` (`judged` is false while no fire was due since the
task was first seen; `first_seen` and `first_due` are null where the sightings are
not kept).

The lock backend is asked first (`backend_check`): one that does not answer, or
refuses a claim, is a problem of its own (`FAIL lock backend ...`, exit 1; in JSON a
row whose `target` is null), with or without a run history to read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from firefly_scheduling.cli.backend_check import BACKEND_TARGET, backend_problem
from firefly_scheduling.cli.common import discover_tasks, settings_for, task_source_options
from firefly_scheduling.cli.first_sightings import first_sightings
from firefly_scheduling.cli.output import echo_json_lines, iso, json_option
from firefly_scheduling.history import HistoryError, RunHistory, RunState, require_history
from firefly_scheduling.initial_delay.port import AnchorStoreError
from firefly_scheduling.initial_delay.selection import resolve_anchor_store
from firefly_scheduling.schedule.cron import CronSchedule
from firefly_scheduling.schedule.durations import format_duration, parse_duration
from firefly_scheduling.schedule.next_fire import cron_schedule_of
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

#: The shortest window "no success" is judged over, whatever the period.
MIN_SUCCESS_WINDOW = timedelta(seconds=120)
_MICROSECOND = timedelta(microseconds=1)
# Growing lookbacks find the previous fire of a minutely cron in one step and of a
# yearly one (or a leap-day one) in a few.
_LOOKBACKS = tuple(timedelta(days=days) for days in (1 / 24, 1, 8, 32, 367, 4 * 366))


@dataclass(frozen=True)
class HealthProblem:
    """Why a task is unhealthy, as one printable line."""

    target: str
    reason: str

    def __str__(self) -> str:
        return f"{self.target}: {self.reason}"


def success_window(descriptor: ScheduledDescriptor, now: datetime) -> timedelta:
    """How long `descriptor` may go without a success: `max(2 * period, 120 s)`."""
    if descriptor.cron is not None:
        schedule = cron_schedule_of(descriptor)
        fire: datetime | None = now + _MICROSECOND
        for _ in range(3):  # the latest fire, then two before it
            fire = None if fire is None else _fire_before(schedule, fire)
        window = MIN_SUCCESS_WINDOW if fire is None else now - fire
    else:
        period = descriptor.fixed_rate or descriptor.fixed_delay or 0.0
        window = timedelta(seconds=2 * period)
    return max(window, MIN_SUCCESS_WINDOW)


def _fire_before(schedule: CronSchedule, instant: datetime) -> datetime | None:
    """The latest fire of `schedule` strictly before `instant`, within about four years."""
    for lookback in _LOOKBACKS:
        fire = schedule.next_after(instant - lookback)
        if fire < instant:
            following = schedule.next_after(fire)
            while following < instant:
                fire, following = following, schedule.next_after(following)
            return fire
    return None


def first_fire_due(descriptor: ScheduledDescriptor, seen: datetime) -> datetime:
    """The first fire of `descriptor` due after it was first seen at `seen`.

    Its initial delay holds it back from `seen` first; a fixed rate or delay is due
    one period after that (a host's first run comes no later).
    """
    start = seen + timedelta(seconds=descriptor.initial_delay or 0.0)
    if descriptor.cron is not None:
        schedule = cron_schedule_of(descriptor)
        return schedule.next_after(start)
    return start + timedelta(seconds=descriptor.fixed_rate or descriptor.fixed_delay or 0.0)


def judged(
    descriptor: ScheduledDescriptor, first_seen: Mapping[str, datetime] | None, now: datetime
) -> bool:
    """Whether a fire of `descriptor` was due since it was first seen, long enough ago to judge.

    True where the sightings are unknown (`first_seen` is None): judged as ever.
    """
    if first_seen is None or descriptor.target not in first_seen:
        return True
    return first_fire_due(descriptor, first_seen[descriptor.target]) <= now - MIN_SUCCESS_WINDOW


def health_problems(
    descriptors: Sequence[ScheduledDescriptor],
    history: RunHistory,
    now: datetime,
    failures_within: timedelta = timedelta(hours=24),
    first_seen: Mapping[str, datetime] | None = None,
) -> list[HealthProblem]:
    """Every problem of the locked `descriptors` the history shows at `now`.

    `first_seen` (by target) holds back the judgement of "no success" until a fire
    was due since then; None judges every task. A failure is no problem once a later
    fire of its task succeeded.
    """
    locked = [(d, d.lock_name) for d in descriptors if d.lock_name is not None]
    problems: list[HealthProblem] = []
    last_success: dict[tuple[str, str], datetime] = {}
    for descriptor, lock in locked:
        window = success_window(descriptor, now)
        success = history.last_success(descriptor.target, lock=lock)
        if success is not None:
            last_success[(lock, descriptor.target)] = success.instant
        if success is None and not judged(descriptor, first_seen, now):
            continue
        if success is None:
            problems.append(HealthProblem(descriptor.target, "no successful run recorded"))
        elif success.instant < now - window:
            problems.append(
                HealthProblem(
                    descriptor.target,
                    f"no success within {format_duration(window.total_seconds())} "
                    f"(last: the fire of {success.instant:%Y-%m-%d %H:%M:%S} UTC)",
                )
            )
    # Another deployment's failures (same target, another lock name) are not ours.
    keys = {(lock, d.target) for d, lock in locked}
    for record in history.failures_since(now - failures_within):
        recovered = last_success.get((record.lock, record.task))
        if recovered is not None and recovered > record.instant:
            continue  # a later fire succeeded: the task works again
        if (record.lock, record.task) in keys:
            problems.append(
                HealthProblem(
                    record.task,
                    f"{record.state.value} at the fire of {record.instant:%Y-%m-%d %H:%M:%S} UTC "
                    f"(attempt {record.attempt} on {record.node}): {record.error or 'no detail'}",
                )
            )
    return problems


def health_rows(
    descriptors: Sequence[ScheduledDescriptor],
    problems: Sequence[HealthProblem],
    history: RunHistory,
    now: datetime,
    first_seen: Mapping[str, datetime] | None = None,
) -> list[dict[str, object]]:
    """One JSON-ready object per locked task: healthy or not, judged yet or not, its first
    sighting and first due fire, its last success, its problems."""
    rows: list[dict[str, object]] = []
    for descriptor in descriptors:
        if descriptor.lock_name is None:
            continue
        reasons = [p.reason for p in problems if p.target == descriptor.target]
        success = history.last_success(descriptor.target, lock=descriptor.lock_name)
        seen = None if first_seen is None else first_seen.get(descriptor.target)
        rows.append(
            {
                "target": descriptor.target,
                "healthy": not reasons,
                "judged": success is not None or judged(descriptor, first_seen, now),
                "first_seen": iso(seen),
                "first_due": None if seen is None else iso(first_fire_due(descriptor, seen)),
                "last_success": None if success is None else iso(success.instant),
                "problems": reasons,
                # `caught_up`: the last success was a missed fire run late (`catchup=`).
                "last_success_state": None if success is None else success.state.value,
            }
        )
    return rows


@click.command()
@task_source_options
@click.option(
    "--failures-within",
    default="24h",
    show_default=True,
    help="How far back a failed, timed-out or expired run makes the check fail.",
)
@json_option
def monitor(
    apps: tuple[str, ...],
    manifest: Path | None,
    paths: tuple[Path, ...],
    failures_within: str,
    as_json: bool,
) -> None:
    """Exit 1 if a task has not succeeded lately or failed recently, saying why."""
    window = timedelta(seconds=parse_duration(failures_within, source="--failures-within"))
    discovered = discover_tasks(apps, manifest, paths)
    backend = backend_problem(settings_for(manifest))
    if backend is not None:
        if as_json:
            echo_json_lines(
                [{"target": None, "healthy": False, "last_success": None, "problems": [backend]}]
            )
        else:
            click.echo(f"FAIL {BACKEND_TARGET} {backend}")
        raise SystemExit(1)
    history = require_history()
    store = resolve_anchor_store(settings_for(manifest))
    now = datetime.now(UTC)
    try:
        seen = first_sightings(discovered.descriptors, store, history)
        problems = health_problems(discovered.descriptors, history, now, window, seen)
        rows = health_rows(discovered.descriptors, problems, history, now, seen)
    except (HistoryError, AnchorStoreError) as err:
        raise click.ClickException(f"cannot check: {err}") from err
    finally:
        store.close()
        history.close()
    if as_json:
        echo_json_lines(rows)
        raise SystemExit(1 if problems else 0)
    checked = sum(1 for d in discovered.descriptors if d.lock_name is not None)
    unchecked = len(discovered.descriptors) - checked
    note = f" ({unchecked} unlocked, not recorded, not checked)" if unchecked else ""
    waiting = sorted(str(row["first_due"]) for row in rows if not row["judged"])
    if waiting:
        note += (
            f"; {len(waiting)} not judged yet, as no fire was due since first seen "
            f"(the first due at {waiting[0]})"
        )
    if problems:
        for problem in problems:
            click.echo(f"FAIL {problem}")
        click.echo(f"{len(problems)} problem(s) in {checked} task(s){note}")
        raise SystemExit(1)
    if not discovered.descriptors:
        click.echo(f"OK, but nothing to check: {discovered.explanation}")
        return
    caught_up = sum(1 for row in rows if row["last_success_state"] == RunState.CAUGHT_UP.value)
    if caught_up:
        note += f"; {caught_up} whose last success was a missed fire caught up late"

    click.echo(f"OK: {checked} task(s) healthy{note}")
