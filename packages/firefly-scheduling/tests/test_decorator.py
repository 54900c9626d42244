"""@scheduled and boot validation of descriptors.

Tasks are defined by executing source in a namespace named `app.tasks`, as if in an
application module: the test module's own name (under pytest's importlib mode) is
not importable, and the decorator rightly refuses targets that cannot be imported.
"""

from __future__ import annotations

import json
import textwrap
from datetime import timedelta
from typing import Any

import pytest

import firefly_scheduling.tasks.decorator as decorator_module
from firefly_scheduling import ConfigurationError, DurationError, ScheduledDescriptor, scheduled
from firefly_scheduling.tasks.decorator import SCHEDULE_ATTRIBUTE, descriptor_of
from firefly_scheduling.tasks.manifest_format import decode, encode
from firefly_scheduling.tasks.validation import validate_descriptor


def define(source: str, module: str = "app.tasks") -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": module, "scheduled": scheduled, "timedelta": timedelta}
    exec(textwrap.dedent(source), namespace)
    return namespace


def described(function: Any) -> ScheduledDescriptor:
    descriptor = descriptor_of(function)
    assert descriptor is not None
    return descriptor


def function_named(name: str = "task") -> Any:
    return define(f"def {name}():\n    return 'ran'\n")[name]


def test_returns_the_same_function_with_only_metadata_added() -> None:
    function = function_named()
    before = dict(function.__dict__)
    assert scheduled(fixed_rate="30s")(function) is function
    assert function() == "ran"
    assert set(function.__dict__) - set(before) == {SCHEDULE_ATTRIBUTE}


def test_decorating_has_no_side_effect_beyond_the_attribute() -> None:
    module_state = dict(vars(decorator_module))
    scheduled(fixed_rate="1s", lock=True)(function_named())
    assert vars(decorator_module) == module_state  # no registry grew


def test_descriptor_fields_for_each_trigger() -> None:
    tasks = define(
        """
        @scheduled(fixed_rate="250ms", lock=False)
        def rate(): ...

        @scheduled(fixed_delay=timedelta(minutes=2), initial_delay=90)
        def delay(): ...

        @scheduled(cron=" 0 3 * * 7 ", zone="America/New_York", lock="nightly", lock_ttl="10m")
        def nightly(): ...
        """
    )
    assert described(tasks["rate"]) == ScheduledDescriptor(target="app.tasks:rate", fixed_rate=0.25)
    assert described(tasks["delay"]) == ScheduledDescriptor(
        target="app.tasks:delay",
        fixed_delay=120.0,
        initial_delay=90.0,
        lock_name="app.tasks:delay",  # locked by default
        lock_ttl=30.0,
    )
    assert described(tasks["nightly"]) == ScheduledDescriptor(
        target="app.tasks:nightly",
        cron="0 3 * * 7",
        zone="America/New_York",
        lock_name="nightly",
        lock_ttl=600.0,
    )
    assert [described(tasks[name]).trigger_kind for name in ("nightly", "rate", "delay")] == [
        "cron",
        "fixed_rate",
        "fixed_delay",
    ]


def test_methods_are_targeted_by_qualname_and_still_work() -> None:
    billing = define(
        """
        class Billing:
            @scheduled(fixed_rate=60, lock=True)
            def invoice(self):
                return "invoiced"

            @scheduled(fixed_rate=1.5)
            @staticmethod
            def ping():
                return "pong"

            class Nested:
                @scheduled(fixed_delay="1s")
                def inner(self): ...
        """
    )["Billing"]
    invoice = described(billing.invoice)
    assert invoice.target == "app.tasks:Billing.invoice"
    assert invoice.lock_name == "app.tasks:Billing.invoice"
    assert invoice.lock_ttl == 30.0
    assert invoice.locked
    assert billing().invoice() == "invoiced"
    assert described(vars(billing)["ping"]).target == "app.tasks:Billing.ping"
    assert billing.ping() == "pong"
    assert described(billing.Nested.inner).target == "app.tasks:Billing.Nested.inner"


def test_nested_functions_are_refused_because_they_cannot_be_imported() -> None:
    outer = define(
        """
        def outer():
            @scheduled(fixed_rate="1s")
            def local(): ...
        """
    )["outer"]
    with pytest.raises(ConfigurationError, match=r"<locals>.*cannot be imported by name"):
        outer()


def test_lambdas_and_unimportable_modules_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="not importable"):
        scheduled(fixed_rate="1s")(lambda: None)
    hyphenated = define("def task(): ...", module="my-app.tasks")["task"]
    with pytest.raises(ConfigurationError, match=r"'my-app\.tasks:task' is not importable"):
        scheduled(fixed_rate="1s")(hyphenated)


def test_non_callables_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="decorates a function"):
        scheduled(fixed_rate="1s")(42)  # type: ignore[type-var]


@pytest.mark.parametrize(
    "triggers",
    [
        {},
        {"cron": "* * * * *", "fixed_rate": "1s"},
        {"fixed_rate": "1s", "fixed_delay": "1s"},
        {"cron": "* * * * *", "fixed_delay": "1s"},
        {"cron": "* * * * *", "fixed_rate": "1s", "fixed_delay": "1s"},
    ],
)
def test_exactly_one_trigger_when_the_decorator_runs(triggers: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError, match="exactly one of cron=, fixed_rate=, fixed_delay="):
        scheduled(**triggers)(function_named())


@pytest.mark.parametrize(
    ("arguments", "error", "fragment"),
    [
        ({"fixed_rate": "5x"}, DurationError, "app.tasks:task fixed_rate: cannot read '5x'"),
        ({"fixed_rate": 0}, DurationError, "fixed_rate: a duration must be greater than zero"),
        ({"fixed_delay": "-3s"}, DurationError, "fixed_delay: a duration must be positive"),
        ({"fixed_rate": "1s", "initial_delay": "P1M"}, DurationError, "task initial_delay"),
        ({"fixed_rate": True}, DurationError, "not a duration"),
        ({"fixed_rate": "1s", "lock": True, "lock_ttl": "0s"}, DurationError, "task lock_ttl"),
        ({"cron": "* * * * * *"}, ConfigurationError, "app.tasks:task: cron '* * * * * *' has 6"),
        ({"cron": "@reboot"}, ConfigurationError, "app.tasks:task: cron '@reboot'"),
        ({"cron": "* * * * *", "zone": "Nowhere/City"}, ConfigurationError, "'Nowhere/City'"),
        ({"fixed_rate": "1s", "zone": "Europe/Paris"}, ConfigurationError, "only applies to cron"),
        ({"fixed_rate": "1s", "lock": None, "lock_ttl": "1m"}, ConfigurationError, "unlocked"),
        ({"fixed_rate": "1s", "lock": False, "lock_ttl": "1m"}, ConfigurationError, "unlocked"),
        ({"fixed_rate": "1s", "lock": ""}, ConfigurationError, "must not be empty"),
        ({"fixed_rate": "1s", "lock": "x" * 256}, ConfigurationError, "limit is 255"),
        ({"fixed_rate": "1s", "lock": "a\x00b"}, ConfigurationError, "NUL"),
        ({"fixed_rate": "1s", "lock": 5}, ConfigurationError, "lock= must be True"),
        ({"fixed_rate": "1s", "timeout": "0s"}, DurationError, "task timeout: a duration must be"),
        ({"fixed_rate": "1s", "timeout": "-5s"}, DurationError, "task timeout: a duration must"),
        ({"fixed_rate": "1s", "timeout": "400d"}, DurationError, "task timeout"),
        (
            {"fixed_rate": "1s", "timeout": "soon"},
            DurationError,
            "task timeout: cannot read 'soon'",
        ),
        ({"fixed_rate": "1s", "timeout": True}, DurationError, "not a duration"),
    ],
)
def test_bad_values_fail_at_decoration_naming_the_target(
    arguments: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error) as raised:
        scheduled(**arguments)(function_named())
    assert "app.tasks:task" in str(raised.value)
    assert fragment in str(raised.value)


@pytest.mark.parametrize("lock", [None, False])
def test_unlocked_tasks_have_no_lock_and_no_ttl(lock: bool | None) -> None:
    function = scheduled(fixed_rate="1s", lock=lock)(function_named())
    assert described(function).lock_name is None
    assert described(function).lock_ttl is None
    assert not described(function).locked


def test_scheduling_twice_is_refused() -> None:
    function = scheduled(fixed_rate="1s")(function_named())
    with pytest.raises(ConfigurationError, match="applied twice"):
        scheduled(cron="* * * * *")(function)


def test_a_long_target_cannot_be_its_own_lock_name() -> None:
    long_name = "t" * 260
    with pytest.raises(ConfigurationError, match="limit is 255"):
        scheduled(fixed_rate="1s", lock=True)(function_named(long_name))
    assert descriptor_of(scheduled(fixed_rate="1s", lock="short")(function_named(long_name)))


# -- validate_descriptor, for descriptors built by hand or read from a manifest ------


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"target": "no_colon", "fixed_rate": 1.0}, "not importable"),
        ({"target": "pkg.mod:", "fixed_rate": 1.0}, "not importable"),
        ({"target": ":func", "fixed_rate": 1.0}, "not importable"),
        ({"target": "pkg-x.mod:func", "fixed_rate": 1.0}, "not importable"),
        ({"target": "pkg.mod:f.<locals>.g", "fixed_rate": 1.0}, "<locals>"),
        ({"target": 42, "fixed_rate": 1.0}, "must be a str"),
        ({"target": "pkg.mod:f"}, "got none"),
        ({"target": "pkg.mod:f", "fixed_rate": 1.0, "cron": "* * * * *"}, "got cron, fixed_rate"),
        ({"target": "pkg.mod:f", "fixed_rate": -1.0}, "pkg.mod:f fixed_rate"),
        ({"target": "pkg.mod:f", "fixed_rate": float("nan")}, "finite"),
        ({"target": "pkg.mod:f", "fixed_rate": "30s"}, "expected a number of seconds"),
        ({"target": "pkg.mod:f", "fixed_rate": True}, "expected a number of seconds"),
        ({"target": "pkg.mod:f", "fixed_rate": 1.0, "initial_delay": 0.0}, "zero"),
        ({"target": "pkg.mod:f", "cron": "61 * * * *"}, "pkg.mod:f: cron '61 * * * *'"),
        ({"target": "pkg.mod:f", "cron": "* * * * *", "zone": "Bad/Zone"}, "'Bad/Zone'"),
        ({"target": "pkg.mod:f", "fixed_rate": 1.0, "zone": "UTC"}, "only applies"),
        ({"target": "pkg.mod:f", "fixed_rate": 1.0, "lock_ttl": 5.0}, "not locked"),
        (
            {"target": "pkg.mod:f", "fixed_rate": 1.0, "lock_name": "x", "lock_ttl": -5.0},
            "pkg.mod:f lock_ttl",
        ),
        ({"target": "pkg.mod:f", "fixed_rate": 1.0, "lock_name": ""}, "pkg.mod:f: lock name"),
        ({"target": "pkg.mod:f", "fixed_rate": 1.0, "lock_name": 7}, "pkg.mod:f: lock name"),
        ({"target": "pkg.mod:f", "fixed_rate": 1.0, "timeout": 0.0}, "pkg.mod:f timeout"),
        ({"target": "pkg.mod:f", "fixed_rate": 1.0, "timeout": "1m"}, "expected a number of"),
        ({"target": "pkg.mod:f", "fixed_rate": 1.0, "timeout": float("inf")}, "pkg.mod:f timeout"),
    ],
)
def test_boot_validation_names_the_target_and_the_value(
    fields: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        validate_descriptor(ScheduledDescriptor(**fields))
    assert fragment in str(raised.value)


def test_boot_validation_normalises_numbers_and_the_default_ttl() -> None:
    descriptor = ScheduledDescriptor(
        target="pkg.mod:Class.method", fixed_delay=5, initial_delay=2, lock_name="shared"
    )
    valid = validate_descriptor(descriptor)
    assert valid.fixed_delay == 5.0
    assert isinstance(valid.fixed_delay, float)
    assert valid.initial_delay == 2.0
    assert valid.lock_ttl == 30.0
    already = ScheduledDescriptor(target="pkg.mod:f", cron="@daily")
    assert validate_descriptor(already) is already


def test_a_timeout_is_a_duration_that_may_outlast_the_lock_ttl_and_the_period() -> None:
    """The keep-alive renews the lock while the body runs: no bound against the TTL."""
    function = scheduled(fixed_rate="10s", lock_ttl="5s", timeout="1m")(function_named())
    assert described(function).timeout == 60.0
    unlocked = scheduled(cron="* * * * *", lock=False, timeout=timedelta(seconds=90))
    assert described(unlocked(function_named("other"))).timeout == 90.0
    assert described(scheduled(fixed_rate="1s")(function_named("plain"))).timeout is None
    valid = validate_descriptor(ScheduledDescriptor(target="pkg.mod:f", fixed_rate=1.0, timeout=2))
    assert (valid.timeout, type(valid.timeout)) == (2.0, float)
    _, loaded = decode(json.loads(encode([described(function)], ["app"])))
    assert loaded == (described(function),)  # kept through the manifest


def test_validate_descriptor_refuses_other_objects() -> None:
    with pytest.raises(ConfigurationError, match="expected a ScheduledDescriptor"):
        validate_descriptor({"target": "pkg.mod:f"})  # type: ignore[arg-type]
