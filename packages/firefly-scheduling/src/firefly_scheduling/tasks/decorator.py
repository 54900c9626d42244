"""`@scheduled`: mark a function or method as a scheduled task.

The decorator only attaches a validated `ScheduledDescriptor` to the function under
`__firefly_scheduled__` and returns the function itself. It registers nothing and
starts nothing, so importing a module of tasks has no effect beyond defining them;
the scanner finds them later, and hosts decide when they run.

Every value is checked when the decorator is applied (at import), so a typo in a
cron or a duration fails at once with the task target in the message.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypedDict, TypeVar, Unpack

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.schedule.durations import parse_duration
from firefly_scheduling.tasks.descriptor import DEFAULT_LOCK_TTL_SECONDS, ScheduledDescriptor
from firefly_scheduling.tasks.validation import validate_descriptor, validate_target

#: The attribute holding a task's descriptor on the decorated function.
SCHEDULE_ATTRIBUTE = "__firefly_scheduled__"

Duration = str | int | float | timedelta
TaskFunction = TypeVar("TaskFunction", bound=Callable[..., Any])


def scheduled(
    *,
    cron: str | None = None,
    fixed_rate: Duration | None = None,
    fixed_delay: Duration | None = None,
    initial_delay: Duration | None = None,
    zone: str | None = None,
    lock: bool | str | None = True,
    lock_ttl: Duration | None = None,
    dst_gap: str | None = None,
    dst_fold: str | None = None,
    jitter: Duration | None = None,
    timeout: Duration | None = None,
    retries: int | None = None,
    retry_backoff: Duration | None = None,
    retry_backoff_max: Duration | None = None,
    overlap: str = "skip",
    catchup: Duration | None = None,
    catchup_limit: int | None = None,
) -> Callable[[TaskFunction], TaskFunction]:
    """Schedule the decorated function or method.

    Exactly one trigger: `cron` (5-field crontab, evaluated in `zone`, UTC by
    default), `fixed_rate` (between starts) or `fixed_delay` (from the end of one
    run to the start of the next). Durations are text (`30s`, `1h30m`, `PT5M`),
    numbers of seconds or `timedelta`s, from 1 ms to 366 days. `initial_delay` holds
    the task back after it is first seen. `lock=True` (the default) guards every run
    with a lock named after the task target, so each fire runs on one node; a string
    is an explicit (shared) lock name, outside the reserved `firefly:` namespace;
    `False` (or `None`) runs unlocked, on every node. `lock_ttl`
    (default 30 s) only applies to a locked task. `dst_gap` (`shift` or `skip`) and
    `dst_fold` (`first`, `last` or `both`) say what a cron does with wall-clock times a
    daylight-saving transition skips or repeats (see `firefly_scheduling.schedule.dst`).
    `jitter` (a duration) starts each fire up to that much after its instant, by an
    offset derived from the task and the instant, the same on every node; it must be
    shorter than the task's period (see `firefly_scheduling.schedule.jitter`).
    `timeout` (a duration) bounds each run's body: an `async def` body is cancelled
    then; a plain one sees `current_fire().timed_out` become True and keeps its lock
    until it returns. Either way the run is recorded `timed_out`. It may exceed
    `lock_ttl`: the lock is renewed while the body runs.
    `retries` (a whole number) runs a failed or timed-out fire again up to that many
    times, retry `k` after a delay drawn in `[0, min(retry_backoff_max, retry_backoff
    * 2**(k-1)))` (defaults 10s and 10m), the same on every node; a retry due after
    the task's next fire is skipped (see `firefly_scheduling.fires.retries`).
    `overlap` says what a fire does while an earlier run of the task still runs
    anywhere in the fleet: `"skip"` (the default), `"allow_all"` (run alongside,
    without the task lock), `"buffer_one"` (wait for it, one waiting fire per task
    in the fleet) or `"buffer_all"` (every fire waits its turn, oldest first, at most
    10 waiting) or `"cancel_other"` (ask the running one to stop, through the
    backend, then run); see `firefly_scheduling.tasks.overlap`.
    `catchup` (a duration) runs, once each and oldest first, the fires of the last
    `catchup` that no node ran because the whole fleet was down; at most
    `catchup_limit` (default 100) of them, the newest, the older ones recorded as
    skipped. It needs a run history (see `firefly_scheduling.fires.catching_up`).
    """
    arguments: ScheduleArguments = {
        "cron": cron,
        "fixed_rate": fixed_rate,
        "fixed_delay": fixed_delay,
        "initial_delay": initial_delay,
        "zone": zone,
        "lock": lock,
        "lock_ttl": lock_ttl,
        "dst_gap": dst_gap,
        "dst_fold": dst_fold,
        "jitter": jitter,
        "timeout": timeout,
        "retries": retries,
        "retry_backoff": retry_backoff,
        "retry_backoff_max": retry_backoff_max,
        "overlap": overlap,
        "catchup": catchup,
        "catchup_limit": catchup_limit,
    }

    def decorate(task: TaskFunction) -> TaskFunction:
        function = _plain_function(task)
        target = validate_target(f"{function.__module__}:{function.__qualname__}")
        descriptor = schedule_descriptor(target, **arguments)
        if descriptor_of(function) is not None:
            raise ConfigurationError(f"{target}: @scheduled is applied twice; use one schedule")
        setattr(function, SCHEDULE_ATTRIBUTE, descriptor)
        return task

    return decorate


class ScheduleArguments(TypedDict, total=False):
    """`@scheduled`'s keyword arguments, as `schedule_descriptor` takes them."""

    cron: str | None
    fixed_rate: Duration | None
    fixed_delay: Duration | None
    initial_delay: Duration | None
    zone: str | None
    lock: bool | str | None
    lock_ttl: Duration | None
    dst_gap: str | None
    dst_fold: str | None
    jitter: Duration | None
    timeout: Duration | None
    retries: int | None
    retry_backoff: Duration | None
    retry_backoff_max: Duration | None
    overlap: str
    catchup: Duration | None
    catchup_limit: int | None


def schedule_descriptor(
    target: str, *, lock_named_after: str | None = None, **arguments: Unpack[ScheduleArguments]
) -> ScheduledDescriptor:
    """The validated descriptor `@scheduled(**arguments)` gives the task `target`.

    The one reading of `@scheduled`'s arguments: the decorator and a schedule added at
    runtime (`ScheduleControl.add_schedule`, `control.runtime_tasks`) both go through
    it, so both refuse alike, naming `target`. `lock=True` names the lock
    `lock_named_after` (a runtime schedule's name), by default `target`.
    """
    target = validate_target(target)
    cron = arguments.get("cron")
    given = [
        name for name in ("cron", "fixed_rate", "fixed_delay") if arguments.get(name) is not None
    ]
    if len(given) != 1:
        raise ConfigurationError(
            f"{target}: @scheduled needs exactly one of cron=, fixed_rate=, fixed_delay=; "
            f"got {', '.join(given) or 'none'}"
        )
    lock = arguments.get("lock", True)
    lock_ttl = arguments.get("lock_ttl")
    lock_name = _lock_name(lock, target, lock_named_after or target)
    if lock_name is None and lock_ttl is not None:
        raise ConfigurationError(
            f"{target}: lock_ttl= is given but lock={lock!r} leaves the task unlocked; "
            "drop lock= (tasks are locked by default) or lock_ttl="
        )

    def seconds(name: str, value: Duration | None) -> float | None:
        return _optional_seconds(value, target, name)

    descriptor = ScheduledDescriptor(
        target=target,
        cron=cron.strip() if isinstance(cron, str) else cron,
        fixed_rate=seconds("fixed_rate", arguments.get("fixed_rate")),
        fixed_delay=seconds("fixed_delay", arguments.get("fixed_delay")),
        initial_delay=seconds("initial_delay", arguments.get("initial_delay")),
        zone=arguments.get("zone"),
        lock_name=lock_name,
        lock_ttl=(
            None if lock_name is None else seconds("lock_ttl", lock_ttl) or DEFAULT_LOCK_TTL_SECONDS
        ),
        dst_gap=arguments.get("dst_gap"),
        dst_fold=arguments.get("dst_fold"),
        jitter=seconds("jitter", arguments.get("jitter")),
        timeout=seconds("timeout", arguments.get("timeout")),
        retries=arguments.get("retries"),
        retry_backoff=seconds("retry_backoff", arguments.get("retry_backoff")),
        retry_backoff_max=seconds("retry_backoff_max", arguments.get("retry_backoff_max")),
        overlap=arguments.get("overlap", "skip"),
        catchup=seconds("catchup", arguments.get("catchup")),
        catchup_limit=arguments.get("catchup_limit"),
    )
    return validate_descriptor(descriptor)


def descriptor_of(candidate: object) -> ScheduledDescriptor | None:
    """The descriptor `@scheduled` attached to `candidate` (unwrapping static/class methods)."""
    if isinstance(candidate, staticmethod | classmethod):
        candidate = candidate.__func__
    found = getattr(candidate, SCHEDULE_ATTRIBUTE, None)
    return found if isinstance(found, ScheduledDescriptor) else None


def _plain_function(task: object) -> Callable[..., Any]:
    function = task.__func__ if isinstance(task, staticmethod | classmethod) else task
    if not callable(function) or not hasattr(function, "__qualname__"):
        raise ConfigurationError(
            f"@scheduled decorates a function or a method, got {type(task).__name__}: {task!r}"
        )
    return function


def _lock_name(lock: object, target: str, named_after: str) -> str | None:
    if lock is None or lock is False:
        return None
    if lock is True:
        return named_after
    if isinstance(lock, str):
        return lock  # checked by validate_descriptor with the target in the message
    raise ConfigurationError(
        f"{target}: lock= must be True, False, None or a lock name, got {lock!r}"
    )


def _optional_seconds(value: Duration | None, target: str, name: str) -> float | None:
    return None if value is None else parse_duration(value, source=f"{target} {name}")
