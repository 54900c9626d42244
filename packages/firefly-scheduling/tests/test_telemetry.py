"""OpenTelemetry: a span per fire with its identity, the body's spans nested, and metrics.

Read back through the SDK's in-memory exporters: what an operator's
collector would receive.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks
from firefly_fake_clock import FakeClock

from firefly_scheduling import ScheduledDescriptor, Settings
from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.hosts.observation.telemetry import (
    NO_TELEMETRY,
    OpenTelemetry,
    process_telemetry,
)
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.tick import TickHost

MODULE = "firefly_host_unit_tasks"
MINUTE = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)  # a Wednesday


class Collected:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])
        self.telemetry = OpenTelemetry(self.tracer_provider, self.meter_provider)

    def points(self) -> dict[str, list[Any]]:
        data = self.metrics.get_metrics_data()
        found: dict[str, list[Any]] = {}
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


@pytest.fixture
def collected() -> Iterator[Collected]:
    tasks.reset()
    made = Collected()
    yield made
    made.tracer_provider.shutdown()
    made.meter_provider.shutdown()


def run_minute(descriptors: list[ScheduledDescriptor], collected: Collected) -> Any:
    runtime = build_runtime(descriptors, Settings(lock_provider="memory"), host="tick", node="n1")
    runtime.telemetry = collected.telemetry
    try:
        return TickHost(descriptors, runtime, clock=FakeClock(MINUTE), grace_period=5.0).run()
    finally:
        runtime.close()


def test_each_fire_is_a_span_with_its_identity_and_the_body_nests_under_it(
    collected: Collected, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner: list[Any] = []
    original = tasks.ping

    def traced_ping() -> None:
        with trace.get_tracer(
            "app", tracer_provider=collected.tracer_provider
        ).start_as_current_span("app work") as span:
            inner.append(span)
            original()

    monkeypatch.setattr(tasks, "ping", traced_ping, raising=True)
    descriptor = ScheduledDescriptor(
        target=f"{MODULE}:ping", cron="* * * * *", lock_name="ping", lock_ttl=30.0
    )
    run_minute([descriptor], collected)
    spans = {span.name: span for span in collected.spans.get_finished_spans()}
    fire = spans[f"fire {MODULE}:ping"]
    work = spans["app work"]
    assert work.parent is not None
    assert work.parent.span_id == fire.context.span_id
    attributes = dict(fire.attributes or {})
    assert attributes["faas.trigger"] == "timer"
    assert attributes["faas.cron"] == "* * * * *"
    assert attributes["firefly.task"] == f"{MODULE}:ping"
    assert attributes["firefly.fire.instant"] == MINUTE.isoformat()
    assert attributes["firefly.node"] == "n1"
    assert attributes["firefly.fire.verdict"] == "succeeded"
    assert isinstance(attributes["firefly.fire.token"], int)


def test_a_failed_body_marks_its_span_as_an_error(collected: Collected) -> None:
    run_minute([ScheduledDescriptor(target=f"{MODULE}:boom", cron="* * * * *")], collected)
    [span] = collected.spans.get_finished_spans()
    assert span.status.status_code is trace.StatusCode.ERROR
    assert "boom" in (span.status.description or "")
    assert dict(span.attributes or {})["firefly.fire.verdict"] == "failed"


def test_a_timed_out_body_is_counted_and_marks_its_span_as_an_error(collected: Collected) -> None:
    descriptors = [
        ScheduledDescriptor(target=f"{MODULE}:overrun", cron="* * * * *", timeout=0.2),
        ScheduledDescriptor(target=f"{MODULE}:ping", cron="* * * * *"),
    ]
    run_minute(descriptors, collected)
    spans = {s.name: s for s in collected.spans.get_finished_spans()}
    overrun = spans[f"fire {MODULE}:overrun"]
    assert overrun.status.status_code is trace.StatusCode.ERROR
    assert overrun.status.description == "timed out after 200ms"
    assert dict(overrun.attributes or {})["firefly.fire.verdict"] == "timed_out"
    points = collected.points()
    timeouts = {p.attributes["firefly.task"]: p.value for p in points["firefly.fire.timeouts"]}
    assert timeouts == {f"{MODULE}:overrun": 1}
    verdicts = {p.attributes["firefly.fire.verdict"] for p in points["firefly.fires"]}
    assert verdicts == {"timed_out", "succeeded"}


def test_retries_that_ran_are_counted_and_their_spans_say_which(collected: Collected) -> None:
    """A fire failing twice, then succeeding: 3 spans, 2 of them retries, counted."""
    tasks.FLAKY_FAILURES = 2
    descriptor = ScheduledDescriptor(
        target=f"{MODULE}:flaky",
        cron="* * * * *",
        lock_name="flaky-telemetry",
        lock_ttl=30.0,
        retries=3,
        retry_backoff=0.2,
        retry_backoff_max=0.4,
    )
    run_minute([descriptor], collected)
    spans = sorted(collected.spans.get_finished_spans(), key=lambda span: span.start_time or 0)
    attributes = [dict(span.attributes or {}) for span in spans]
    assert [a.get("firefly.fire.retry") for a in attributes] == [None, 1, 2]
    assert [a["firefly.fire.attempt"] for a in attributes] == [1, 2, 3]
    assert [a["firefly.fire.verdict"] for a in attributes] == ["failed", "failed", "succeeded"]
    points = collected.points()
    retries = {p.attributes["firefly.task"]: p.value for p in points["firefly.fire.retries"]}
    assert retries == {f"{MODULE}:flaky": 2}


def test_fires_lateness_duration_and_claim_latency_are_recorded(collected: Collected) -> None:
    descriptors = [
        ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=15.0, lock_name="p", lock_ttl=30.0),
        ScheduledDescriptor(target=f"{MODULE}:boom", cron="* * * * *"),
    ]
    run_minute(descriptors, collected)
    points = collected.points()
    by_verdict = {
        (
            p.attributes["firefly.task"].partition(":")[2],
            p.attributes["firefly.fire.verdict"],
        ): p.value
        for p in points["firefly.fires"]
    }
    assert by_verdict == {("ping", "succeeded"): 4, ("boom", "failed"): 1}
    lateness = {p.attributes["firefly.task"]: p.count for p in points["firefly.fire.lateness"]}
    assert lateness == {f"{MODULE}:ping": 4, f"{MODULE}:boom": 1}
    durations = {p.attributes["firefly.task"]: p.count for p in points["firefly.fire.duration"]}
    assert durations == lateness
    claims = {p.attributes["firefly.task"]: p.count for p in points["firefly.fire.claim.duration"]}
    assert claims == {f"{MODULE}:ping": 4}  # the unlocked task claims nothing
    assert "firefly.keepalive.failures" in points


def test_without_the_api_installed_telemetry_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    import firefly_scheduling.hosts.observation.telemetry as module  # noqa: PLC0415

    monkeypatch.setattr(module, "_PROCESS_TELEMETRY", None)
    monkeypatch.setattr(module.importlib.util, "find_spec", lambda name: None)
    assert process_telemetry() is NO_TELEMETRY
    descriptor = ScheduledDescriptor(target=f"{MODULE}:ping", cron="* * * * *")
    with NO_TELEMETRY.fire(Fire(descriptor, MINUTE), "n") as ended:
        ended(FireResult(Fire(descriptor, MINUTE), "n", Verdict.SUCCEEDED))


GLOBAL_PROVIDERS_SCRIPT = """
import time
from datetime import UTC, datetime

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from firefly_scheduling import ScheduledDescriptor
from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.hosts.observation.telemetry import OpenTelemetry

descriptor = ScheduledDescriptor(target="m:ping", cron="* * * * *")
fire = Fire(descriptor, datetime(2026, 6, 3, 12, 0, tzinfo=UTC))
telemetry = OpenTelemetry()  # global providers, none set yet


def one_fire():
    with telemetry.fire(fire, "n1") as ended:
        inside = trace.get_current_span().is_recording()
        ended(FireResult(fire, "n1", Verdict.SUCCEEDED))
    return inside


before = one_fire()
print("before", before)
spans = InMemorySpanExporter()
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(tracer_provider)
reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
time.sleep(1.1)  # a provider set later is looked for at most once a second
after = one_fire()
print("after", after, [s.name for s in spans.get_finished_spans()])
names = [
    m.name
    for r in reader.get_metrics_data().resource_metrics
    for s in r.scope_metrics
    for m in s.metrics
]
print("metrics", "firefly.fires" in names)
"""


def test_global_providers_set_after_the_host_started_are_used_within_a_second() -> None:
    """Until the application sets a global provider a fire records nothing (and pays
    nothing for it); once it does, fires are spans and metrics again."""
    import subprocess  # noqa: PLC0415

    # A process of its own: a global provider can be set only once per process.
    done = subprocess.run(
        [sys.executable, "-c", GLOBAL_PROVIDERS_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "before False",
        "after True ['fire m:ping']",
        "metrics True",
    ]


def test_a_fire_that_waited_buffered_is_counted_with_its_verdict(collected: Collected) -> None:
    descriptor = ScheduledDescriptor(
        target=f"{MODULE}:ping", fixed_rate=60.0, lock_name="p", overlap="buffer_one"
    )
    fire = Fire(descriptor, MINUTE)
    for verdict, waited in (
        (Verdict.SUCCEEDED, 2.0),
        (Verdict.OVERLAPPING, 1.5),
        (Verdict.OVERLAPPING, None),
    ):
        with collected.telemetry.fire(fire, "n1") as ended:
            ended(FireResult(fire, "n1", verdict, buffered_seconds=waited))
    buffered = {
        p.attributes["firefly.fire.verdict"]: p.value
        for p in collected.points()["firefly.fire.buffered"]
    }
    assert buffered == {"succeeded": 1, "overlapping": 1}


def test_a_run_a_newer_fire_asked_to_stop_is_counted_as_cancelled(collected: Collected) -> None:
    descriptor = ScheduledDescriptor(
        target=f"{MODULE}:ping", fixed_rate=60.0, lock_name="p", overlap="cancel_other"
    )
    fire = Fire(descriptor, MINUTE)
    for verdict in (Verdict.CANCELLED, Verdict.SUCCEEDED):
        with collected.telemetry.fire(fire, "n1") as ended:
            ended(FireResult(fire, "n1", verdict))
    points = collected.points()
    cancelled = {p.attributes["firefly.task"]: p.value for p in points["firefly.fire.cancelled"]}
    assert cancelled == {f"{MODULE}:ping": 1}
    verdicts = {p.attributes["firefly.fire.verdict"]: p.value for p in points["firefly.fires"]}
    assert verdicts == {"cancelled": 1, "succeeded": 1}
