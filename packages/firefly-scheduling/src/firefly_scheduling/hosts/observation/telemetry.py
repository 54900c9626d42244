"""OpenTelemetry for every fire a host runs: one span, and a few metrics.

Optional and API-only: with the `[otel]` extra (`opentelemetry-api`) installed, each
fire is a span and the metrics below are recorded through the global providers the
application configured (an SDK, the OpenTelemetry distro, a collector's exporters).
Until the application sets a global provider, a fire skips the span and the metrics
altogether (the API's placeholders would record nothing, at a cost per fire), and
uses them within a second once it does; without the API package `NO_TELEMETRY`
is used and nothing is imported at all. The library never
configures exporters: that is the application's decision.

The span (`fire <target>`, kind INTERNAL) wraps the claim, the task lock and the
body, so the body's own spans nest under it. Its attributes follow the FaaS timer
conventions where they fit (`faas.trigger=timer`, `faas.cron`) and add the fire's
identity: `firefly.task`, `firefly.fire.instant`, `firefly.node`, then, when the
fire ends, `firefly.fire.verdict`, `firefly.fire.attempt`, `firefly.fire.token`. A
failed or timed-out body sets the span's status to ERROR with its message.

Metrics (names are stable; see docs/monitoring.md for a Grafana-ready list):

* `firefly.fires` (counter, `{fire}`): fires by `firefly.task` and `firefly.fire.verdict`;
* `firefly.fire.lateness` (histogram, `s`): scheduled start (the instant, plus its
  jitter offset) to body start;
* `firefly.fire.duration` (histogram, `s`): body duration;
* `firefly.fire.claim.duration` (histogram, `s`): claiming the fire, round trip included;
* `firefly.fire.timeouts` (counter, `{fire}`): fires whose body ran past its task's
  `timeout=`, by `firefly.task` (they are in `firefly.fires` too, as `timed_out`);
* `firefly.fire.buffered` (counter, `{fire}`): fires that waited, buffered, for an
  earlier run of their task (`overlap="buffer_one"` or `"buffer_all"`), by
  `firefly.task`, with `firefly.fire.verdict` (ran, or skipped when their wait ended
  without the lock);
* `firefly.fire.cancelled` (counter, `{fire}`): runs a newer fire asked to stop
  (`overlap="cancel_other"`), by `firefly.task` (in `firefly.fires` too, as
  `cancelled`);
* `firefly.lock.lost` (counter, `{lock}`): task locks lost while a body ran;
* `firefly.fire.retries` (counter, `{fire}`): retries of failed fires (the task's
  `retries=`) whose body ran, by `firefly.task` (their span carries
  `firefly.fire.retry`, the retry's number);
* `firefly.keepalive.failures` (counter, `{renewal}`): renewals that failed and
  will be retried (a lost lock is counted once more, in `firefly.lock.lost`);
* `firefly.fire.missed` (counter, `{fire}`): fires of a task with `catchup=` that no
  node ran nor recorded, as this node found them at catch-up, by `firefly.task`
  (the ones beyond `catchup_limit` included);
* `firefly.fire.caught_up` (counter, `{fire}`): missed fires whose body ran here,
  late, by `firefly.task` (they are in `firefly.fires` too, by their verdict).
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from firefly_scheduling.fires.outcome import TriggerKind, Verdict
from firefly_scheduling.locks.keepalive import KEEPALIVE_STATS
from firefly_scheduling.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling.fires.outcome import Fire, FireResult

INSTRUMENTATION = "firefly_scheduling"
#: How often a fire looks again for a global provider while none is set.
RECHECK_SECONDS = 1.0
logger = logging.getLogger(__name__)

#: Verdicts of a body that ran and went wrong: its span's status is ERROR.
_ERROR_VERDICTS = frozenset({Verdict.FAILED, Verdict.TIMED_OUT})
#: Called once with the fire's result when it ended.
FinishFire = Callable[["FireResult"], None]


class Telemetry(Protocol):
    """What a host asks of telemetry: a context around each fire."""

    def fire(self, fire: Fire, node: str) -> AbstractContextManager[FinishFire]: ...

    def missed(self, target: str, count: int) -> None:
        """Catch-up found `count` fires of `target` that no node ran nor recorded."""
        ...


def _ignore(result: FireResult) -> None:
    del result


class _Ignored(AbstractContextManager[FinishFire]):
    """The context of a fire nothing records: yields `_ignore`, allocates nothing."""

    def __enter__(self) -> FinishFire:
        return _ignore

    def __exit__(self, *exc_info: object) -> None:
        return None


_IGNORED = _Ignored()


class NoTelemetry:
    """Used when `opentelemetry-api` is not installed: does nothing, imports nothing."""

    def fire(self, fire: Fire, node: str) -> AbstractContextManager[FinishFire]:
        return _IGNORED

    def missed(self, target: str, count: int) -> None:
        return None


NO_TELEMETRY = NoTelemetry()


class OpenTelemetry:
    """Spans and metrics through OpenTelemetry's API (global providers unless given)."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        from opentelemetry import metrics, trace  # noqa: PLC0415 - an optional dependency

        self._trace = trace
        self._metrics = metrics
        #: Given providers are always used; the global ones only once the application
        #: replaced the API's placeholders (`_configured`).
        self._explicit = tracer_provider is not None or meter_provider is not None
        self._unset_meter_provider = _placeholder_meter_provider(metrics)
        self._provider_set = False
        self._recheck_at = 0.0
        self._tracer = trace.get_tracer(
            INSTRUMENTATION, __version__, tracer_provider=tracer_provider
        )
        meter = metrics.get_meter(INSTRUMENTATION, __version__, meter_provider=meter_provider)
        self._fires = meter.create_counter(
            "firefly.fires", unit="{fire}", description="Fires handled, by task and verdict"
        )
        self._lateness = meter.create_histogram(
            "firefly.fire.lateness",
            unit="s",
            description="From a fire's scheduled instant to its body's start",
        )
        self._duration = meter.create_histogram(
            "firefly.fire.duration", unit="s", description="How long a fire's body ran"
        )
        self._claim = meter.create_histogram(
            "firefly.fire.claim.duration",
            unit="s",
            description="How long claiming a fire took, its round trip included",
        )
        self._timeouts = meter.create_counter(
            "firefly.fire.timeouts",
            unit="{fire}",
            description="Fires whose body ran past its task's timeout",
        )
        self._buffered = meter.create_counter(
            "firefly.fire.buffered",
            unit="{fire}",
            description="Fires that waited for an earlier run of their task",
        )
        self._cancelled = meter.create_counter(
            "firefly.fire.cancelled",
            unit="{fire}",
            description="Runs a newer fire of their task asked to stop",
        )
        self._missed = meter.create_counter(
            "firefly.fire.missed",
            unit="{fire}",
            description="Fires no node ran nor recorded, found at catch-up",
        )
        self._caught_up = meter.create_counter(
            "firefly.fire.caught_up",
            unit="{fire}",
            description="Missed fires run late, within their task's catchup window",
        )
        self._lost = meter.create_counter(
            "firefly.lock.lost", unit="{lock}", description="Task locks lost while a body ran"
        )
        self._retries = meter.create_counter(
            "firefly.fire.retries",
            unit="{fire}",
            description="Retries of failed fires whose body ran",
        )
        meter.create_observable_counter(
            "firefly.keepalive.failures",
            callbacks=[self._observe_renewal_failures],
            unit="{renewal}",
            description="Lock renewals that failed (retried until the lease lapses)",
        )

    def fire(self, fire: Fire, node: str) -> AbstractContextManager[FinishFire]:
        if self._explicit or self._configured():
            return self._fire(fire, node)
        return _IGNORED

    def missed(self, target: str, count: int) -> None:
        if count > 0 and (self._explicit or self._configured()):
            self._missed.add(count, {"firefly.task": target})

    def _configured(self) -> bool:
        """Whether the application set a global tracer or meter provider by now.

        Until it does, the API hands out placeholders whose spans and instruments
        record nothing, yet a span still costs its attributes, a context switch and
        an annotation per fire: a few percent of a fire that loses its claim. Asked
        again at most every `RECHECK_SECONDS` (the API reads the environment on each
        look-up), so a provider set after the host started is used within a second;
        once set, a global provider stays.
        """
        if self._provider_set:
            return True
        now = time.monotonic()
        if now < self._recheck_at:
            return False
        self._recheck_at = now + RECHECK_SECONDS
        trace, metrics = self._trace, self._metrics
        unset = self._unset_meter_provider
        self._provider_set = (
            not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
            or unset is None
            or metrics.get_meter_provider() is not unset
        )
        return self._provider_set

    @contextmanager
    def _fire(self, fire: Fire, node: str) -> Iterator[FinishFire]:
        attributes: dict[str, str] = {
            "faas.trigger": "timer",
            "firefly.task": fire.target,
            "firefly.fire.instant": fire.instant.isoformat(),
            "firefly.node": node,
        }
        if fire.task.cron is not None:
            attributes["faas.cron"] = fire.task.cron
        with self._tracer.start_as_current_span(
            f"fire {fire.target}", attributes=attributes, record_exception=False
        ) as span:
            yield lambda result: self._finish(span, result)

    def _finish(self, span: Any, result: FireResult) -> None:
        try:
            self._annotate(span, result)
        except Exception:  # telemetry must never break a host
            logger.exception("recording telemetry for %s failed", result.fire.target)

    def _annotate(self, span: Any, result: FireResult) -> None:
        for each in (*result.adopted, result):
            self._record(each)
        verdict = result.verdict.name.lower()
        span.set_attribute("firefly.fire.verdict", verdict)
        if result.attempt is not None:
            span.set_attribute("firefly.fire.attempt", result.attempt)
        if result.token is not None:
            span.set_attribute("firefly.fire.token", result.token)
        if result.fire.retry is not None:
            span.set_attribute("firefly.fire.retry", result.fire.retry.number)
        if result.verdict in _ERROR_VERDICTS or result.lost:
            detail = result.error or verdict
            if result.lost:
                detail = f"{detail}; the task lock was lost while the body ran"
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, detail))

    def _record(self, result: FireResult) -> None:
        labels = {"firefly.task": result.fire.target}
        self._fires.add(1, {**labels, "firefly.fire.verdict": result.verdict.name.lower()})
        if result.started_at is not None:
            lateness = (result.started_at - result.fire.due).total_seconds()
            self._lateness.record(max(lateness, 0.0), labels)
            if result.ended_at is not None:
                duration = (result.ended_at - result.started_at).total_seconds()
                self._duration.record(duration, labels)
        if result.claim_seconds is not None:
            self._claim.record(result.claim_seconds, labels)
        if result.verdict is Verdict.TIMED_OUT:
            self._timeouts.add(1, labels)
        if result.verdict is Verdict.CANCELLED:
            self._cancelled.add(1, labels)
        if result.buffered_seconds is not None:
            verdict = result.verdict.name.lower()
            self._buffered.add(1, {**labels, "firefly.fire.verdict": verdict})
        if result.ran and result.fire.trigger is TriggerKind.CATCH_UP:
            self._caught_up.add(1, labels)
        if result.lost:
            self._lost.add(1, labels)
        if result.fire.retry is not None and result.ran:
            self._retries.add(1, labels)

    @staticmethod
    def _observe_renewal_failures(options: Any) -> Iterator[Any]:
        from opentelemetry.metrics import Observation  # noqa: PLC0415

        yield Observation(KEEPALIVE_STATS.failed_renewals)


def _placeholder_meter_provider(metrics: Any) -> Any:
    """The API's global placeholder meter provider while none is set, else None.

    The metrics API has no public proxy class to test against (the tracing API has
    `ProxyTracerProvider`); its placeholder is the one object `get_meter_provider`
    returns until `set_meter_provider`, so it is recognised by identity. None (a
    provider is set already, or the placeholder is not recognised) means "configured".
    """
    current = metrics.get_meter_provider()
    return current if type(current).__name__ == "_ProxyMeterProvider" else None


def process_telemetry() -> Telemetry:
    """OpenTelemetry when its API is installed, else `NO_TELEMETRY`; one per process."""
    global _PROCESS_TELEMETRY  # noqa: PLW0603 - built once, on first use
    if _PROCESS_TELEMETRY is None:
        try:
            _PROCESS_TELEMETRY = (
                NO_TELEMETRY
                if importlib.util.find_spec("opentelemetry") is None
                else OpenTelemetry()
            )
        except ImportError:  # an `opentelemetry` namespace without the API in it
            _PROCESS_TELEMETRY = NO_TELEMETRY
    return _PROCESS_TELEMETRY


_PROCESS_TELEMETRY: Telemetry | None = None
