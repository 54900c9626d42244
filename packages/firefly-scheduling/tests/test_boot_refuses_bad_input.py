"""Bad task values are refused at boot, naming the task.

Each value here was accepted once and failed later, or never: a raw `OverflowError`,
a rate parsed from another script's digits, an interval that overflows the first
fire instant, a rate that spins a CPU, a lock name inside firefly's own namespace.
The decorator and the descriptor validation (what a manifest load runs) are both
checked, since a manifest may hold values the decorator never saw.
"""

from __future__ import annotations

import textwrap
from datetime import timedelta
from typing import Any

import pytest

from firefly_scheduling import (
    ConfigurationError,
    DurationError,
    InMemoryLock,
    ScheduledDescriptor,
    scheduled,
)
from firefly_scheduling.tasks.validation import validate_descriptor, validate_descriptors


def task_function() -> Any:
    namespace: dict[str, Any] = {"__name__": "app.tasks"}
    exec(textwrap.dedent("def report():\n    return 'ran'\n"), namespace)
    return namespace["report"]


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        pytest.param({"fixed_rate": 10**400}, "app.tasks:report fixed_rate: 1000", id="10**400"),
        ({"fixed_rate": "٣s"}, "app.tasks:report fixed_rate: cannot read '٣s'"),
        ({"fixed_rate": "999999999d"}, "app.tasks:report fixed_rate: '999999999d' is longer"),
        ({"fixed_delay": timedelta(days=400)}, "app.tasks:report fixed_delay: "),
        ({"fixed_rate": "1s", "initial_delay": "P60W"}, "app.tasks:report initial_delay: 'P60W'"),
        ({"fixed_rate": "1s", "lock": True, "lock_ttl": "367d"}, "app.tasks:report lock_ttl: "),
        ({"fixed_rate": 0.0001}, "app.tasks:report fixed_rate: 0.0001 is shorter than 1ms"),
        ({"fixed_delay": "0.5ms"}, "app.tasks:report fixed_delay: '0.5ms' is shorter than 1ms"),
        ({"fixed_delay": timedelta(microseconds=1)}, "shorter than 1ms"),
    ],
)
def test_the_decorator_refuses_durations_out_of_bounds(
    arguments: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(DurationError) as raised:
        scheduled(**arguments)(task_function())
    assert fragment in str(raised.value)


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("fixed_rate", 86_399_999_913_600.0, "pkg.mod:f fixed_rate: 86399999913600.0 is longer"),
        pytest.param("fixed_rate", 10**400, "pkg.mod:f fixed_rate: ", id="10**400"),
        ("fixed_delay", 1e-4, "pkg.mod:f fixed_delay: 0.0001 is shorter than 1ms"),
        ("initial_delay", 1e12, "pkg.mod:f initial_delay: "),
    ],
)
def test_descriptor_validation_refuses_durations_out_of_bounds(
    field: str, value: float, fragment: str
) -> None:
    fields: dict[str, Any] = {"target": "pkg.mod:f", "fixed_rate": 1.0, field: value}
    if field == "fixed_delay":
        del fields["fixed_rate"]
    with pytest.raises(DurationError) as raised:
        validate_descriptor(ScheduledDescriptor(**fields))
    assert fragment in str(raised.value)


def test_a_lock_ttl_out_of_bounds_is_refused_in_a_descriptor() -> None:
    descriptor = ScheduledDescriptor(
        target="pkg.mod:f", fixed_rate=1.0, lock_name="report", lock_ttl=1e9
    )
    with pytest.raises(DurationError, match=r"pkg\.mod:f lock_ttl: 1000000000\.0 is longer"):
        validate_descriptor(descriptor)


@pytest.mark.parametrize("lock", ["firefly:fire:20260101T000000.000000Z:app.tasks:report",
                                  "firefly:probe", "firefly:"])  # fmt: skip
def test_a_lock_name_in_the_reserved_namespace_is_refused_by_the_decorator(lock: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        scheduled(fixed_rate="1s", lock=lock)(task_function())
    message = str(raised.value)
    assert message.startswith("app.tasks:report: ")
    assert f"lock name {lock!r} is in the reserved 'firefly:' namespace" in message


def test_a_lock_named_after_a_target_in_a_module_called_firefly_says_why() -> None:
    namespace: dict[str, Any] = {"__name__": "firefly"}
    exec("def probe():\n    pass\n", namespace)
    with pytest.raises(ConfigurationError, match=r"lock=True names the lock after the task"):
        scheduled(fixed_rate="1s", lock=True)(namespace["probe"])


def test_a_reserved_lock_name_in_a_manifest_is_refused_naming_the_task() -> None:
    descriptors = [
        ScheduledDescriptor(target="pkg.mod:ok", fixed_rate=1.0, lock_name="fine"),
        ScheduledDescriptor(target="pkg.mod:bad", fixed_rate=1.0, lock_name="firefly:x"),
    ]
    with pytest.raises(ConfigurationError, match=r"^pkg\.mod:bad: lock name 'firefly:x'"):
        validate_descriptors(descriptors)


@pytest.mark.parametrize("name", ["Firefly:x", "firefly-x", "app:firefly:x", "fireflies"])
def test_names_outside_the_namespace_are_still_accepted(name: str) -> None:
    function = scheduled(fixed_rate="1s", lock=name)(task_function())
    assert function() == "ran"


def test_the_lock_port_still_accepts_reserved_names_for_the_librarys_own_use() -> None:
    lock = InMemoryLock()
    assert lock.try_acquire("firefly:fire:20260101T000000.000000Z:app.tasks:report", 5.0)
    lock.release("firefly:fire:20260101T000000.000000Z:app.tasks:report")
