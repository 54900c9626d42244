"""The hosts: where scheduled tasks actually run.

* `ResidentHost` (`firefly-scheduling run`): a long-lived process on APScheduler.
* `TickHost` (`firefly-scheduling tick`): one pass per minute, for crontab or a
  Kubernetes CronJob.
* `register`: the library host, on an APScheduler scheduler the application runs.

All three turn a trigger into a `Fire` and call `execute_fire`, the single path
through the initial-delay gate and the lock guard.
"""

from __future__ import annotations

from firefly_scheduling.hosts.boot import build_runtime, validated
from firefly_scheduling.hosts.clock import Clock, SystemClock
from firefly_scheduling.hosts.fires import Fire, FireObserver, FireResult, FireSkip, execute_fire
from firefly_scheduling.hosts.library import register
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime import Lazy, TaskRuntime
from firefly_scheduling.hosts.tick import TickHost, TickReport

__all__ = [
    "Clock",
    "Fire",
    "FireObserver",
    "FireResult",
    "FireSkip",
    "Lazy",
    "ResidentHost",
    "SystemClock",
    "TaskRuntime",
    "TickHost",
    "TickReport",
    "build_runtime",
    "execute_fire",
    "register",
    "validated",
]
