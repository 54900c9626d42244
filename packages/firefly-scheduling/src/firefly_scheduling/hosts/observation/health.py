"""Health a load balancer or Kubernetes can act on: is the scheduler alive, can it work?

* **Liveness** (`/livez`): the host's scheduling loop woke on time. The host beats
  a `Heartbeat` every `HEARTBEAT_SECONDS` from the loop itself (APScheduler's own
  thread under `run`, the event loop under the asyncio host); a loop stalled or dead
  stops beating, and the check fails once the last beat is `stall_seconds` old. A
  process whose loop is dead looks healthy to every other check; restarting it is
  the cure, which is what a liveness probe does.
* **Readiness** (`/readyz`): the lock backend and the run history answer now. The
  check makes one real round trip to each (an acquisition and release of the
  reserved name `firefly:health:<node>`, and a read of the history), at most once
  per `PROBE_CACHE_SECONDS` however often it is asked, and reports the error of
  whichever did not answer, plus the last backend error a fire met. A host that is
  stopping is not ready.

Error texts are the library's own (`LockBackendError`, `HistoryError`), which never
carry a password; any other exception is reported by its type alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from firefly_scheduling.errors import FireflySchedulingError
from firefly_scheduling.fires.outcome import FireResult, Verdict

if TYPE_CHECKING:
    from firefly_scheduling.hosts.runtime.task_runtime import TaskRuntime

#: How often the scheduling loop beats.
HEARTBEAT_SECONDS = 1.0
#: How old the last beat may be before the loop counts as stalled.
DEFAULT_STALL_SECONDS = 15.0
#: How long one readiness answer is reused: probes from several sources cost one check.
PROBE_CACHE_SECONDS = 1.0
#: The reserved lock name of the readiness probe, followed by the node's name.
PROBE_LOCK_PREFIX = "firefly:health:"
PROBE_LOCK_TTL_SECONDS = 10.0
#: The task (and lock) name the history probe reads: a narrow, indexed read.
PROBE_HISTORY_TASK = "firefly:health"
#: Verdicts that mean the backend failed a fire.
_BACKEND_VERDICTS = frozenset({Verdict.BACKEND_ERROR, Verdict.UNAVAILABLE, Verdict.LOCK_LOST})


def error_text(err: BaseException) -> str:
    """An error as the health answer shows it: our own messages whole, others by type."""
    if isinstance(err, FireflySchedulingError):
        return f"{type(err).__name__}: {err}"
    return f"{type(err).__name__} (see the host's log)"


class Heartbeat:
    """The last time the scheduling loop woke, by the monotonic clock. Thread-safe."""

    def __init__(self, *, stall_seconds: float = DEFAULT_STALL_SECONDS) -> None:
        self.stall_seconds = stall_seconds
        self._started = time.monotonic()
        self._last: float | None = None
        self._beats = 0

    def beat(self) -> None:
        """Called by the loop itself, every `HEARTBEAT_SECONDS`."""
        self._last = time.monotonic()
        self._beats += 1

    def check(self) -> tuple[bool, dict[str, object]]:
        """Whether the loop woke on time, and the figures that say so."""
        now = time.monotonic()
        since = self._last if self._last is not None else self._started
        age = now - since
        detail: dict[str, object] = {
            "beats": self._beats,
            "seconds_since_last_beat": None if self._last is None else round(age, 3),
            "stall_seconds": self.stall_seconds,
        }
        return age <= self.stall_seconds, detail


@dataclass(frozen=True)
class Probe:
    """One backend's answer: whether it answered, and its error when it did not."""

    ok: bool
    error: str | None = None

    def as_json(self) -> dict[str, object]:
        return {"ok": self.ok, "error": self.error}


class LastBackendError:
    """A `FireObserver` keeping the last backend error a fire met, for `/readyz`."""

    def __init__(self) -> None:
        self._last: dict[str, object] | None = None

    def fire_finished(self, result: FireResult) -> None:
        if result.verdict in _BACKEND_VERDICTS or result.lost:
            self._last = {
                "at": datetime.now(UTC).isoformat(),
                "task": result.target,
                "fire": result.instant.isoformat(),
                "verdict": result.verdict.name.lower(),
                "error": result.error,
            }

    @property
    def last(self) -> dict[str, object] | None:
        return self._last


class HostHealth:
    """What `/livez` and `/readyz` answer for one host: status code and JSON body.

    `probe_lock` and `probe_history` make one round trip each and raise when the
    backend does not answer (`probe_history` is None without a history). `stopping`
    says whether the host began to shut down.
    """

    def __init__(
        self,
        heartbeat: Heartbeat,
        *,
        probe_lock: Callable[[], None],
        probe_history: Callable[[], None] | None,
        stopping: Callable[[], bool],
        last_error: LastBackendError,
    ) -> None:
        self.heartbeat = heartbeat
        self._probe_lock = probe_lock
        self._probe_history = probe_history
        self._stopping = stopping
        self.last_error = last_error
        self._mutex = threading.Lock()
        self._cached: tuple[float, Probe, Probe | None] | None = None

    def livez(self) -> tuple[int, dict[str, object]]:
        alive, detail = self.heartbeat.check()
        status = "stopping" if self._stopping() else "alive" if alive else "stalled"
        return (200 if alive else 503), {"status": status, **detail}

    def readyz(self) -> tuple[int, dict[str, object]]:
        if self._stopping():
            return 503, {"status": "stopping", "last_error": self.last_error.last}
        lock, history = self._probes()
        return self.ready_answer(lock, history)

    def ready_answer(self, lock: Probe, history: Probe | None) -> tuple[int, dict[str, object]]:
        """`/readyz` from the probes' answers (the asyncio host makes its own probes)."""
        ready = lock.ok and (history is None or history.ok)
        body: dict[str, object] = {
            "status": "ready" if ready else "not ready",
            "lock": lock.as_json(),
            "history": None if history is None else history.as_json(),
            "last_error": self.last_error.last,
        }
        return (200 if ready else 503), body

    def _probes(self) -> tuple[Probe, Probe | None]:
        with self._mutex:  # one check at a time, its answer reused for a second
            cached = self._cached
            if cached is not None and time.monotonic() - cached[0] < PROBE_CACHE_SECONDS:
                return cached[1], cached[2]
            lock = probe(self._probe_lock)
            history = None if self._probe_history is None else probe(self._probe_history)
            self._cached = (time.monotonic(), lock, history)
            return lock, history


def probe(check: Callable[[], None]) -> Probe:
    """Run one backend check: its answer, never its exception."""
    try:
        check()
    except Exception as err:  # noqa: BLE001  # a probe reports any failure, never raises
        return Probe(False, error_text(err))
    return Probe(True)


def probe_lock_name(node: str) -> str:
    return PROBE_LOCK_PREFIX + node


def threaded_host_health(runtime: TaskRuntime, heartbeat: Heartbeat) -> HostHealth:
    """The health of a threaded host (`run`) on `runtime`, its lock and history built.

    Adds the last-backend-error observer to the runtime's observers.
    """
    last_error = LastBackendError()
    runtime.observers = (*runtime.observers, last_error)
    name = probe_lock_name(runtime.node)
    history = runtime.fire_runner.get().history

    def probe_lock() -> None:
        lock = runtime.lock.get()
        if lock.try_acquire(name, PROBE_LOCK_TTL_SECONDS):
            lock.release(name)

    def probe_history() -> None:
        if history is not None:
            history.runs(PROBE_HISTORY_TASK, 1, lock=PROBE_HISTORY_TASK)

    return HostHealth(
        heartbeat,
        probe_lock=probe_lock,
        probe_history=None if history is None else probe_history,
        stopping=lambda: not runtime.accepting,
        last_error=last_error,
    )
