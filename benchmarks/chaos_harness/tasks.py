"""The task mix the node processes run (`--app chaos_harness.tasks`).

Every body appends a `start` event before its work and an `end` event after it to
the evidence log (`FIREFLY_CHAOS_EVIDENCE`), with what `current_fire()` says: the
instant, attempt, fencing token and, at the end, whether the lock was reported lost.
Lock names carry `FIREFLY_CHAOS_PREFIX`, unique per run, because the SQL servers are
shared.

The mix (issue 8): 1 ms bodies; a body longer than its `lock_ttl` (kept alive by
renewals); two tasks sharing one lock name; `fixed_rate` and cron tasks.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from chaos_harness.evidence import EvidenceLog
from firefly_scheduling import current_fire, scheduled

PREFIX = os.environ.get("FIREFLY_CHAOS_PREFIX", "chaos")
#: Every task's lease: short, so a SIGSTOP of a few seconds outlives it.
LOCK_TTL = "1s"
_LOG: EvidenceLog | None = None
#: Seconds between fires, epoch-aligned (the cron task fires every minute).
QUICK_RATE, QUICK2_RATE, LONG_RATE, SHARED_A_RATE, SHARED_B_RATE = 0.1, 0.5, 2.0, 1.0, 0.7
#: Every task's target and period: the fires the checker expects.
SCHEDULES = {
    f"{__name__}:quick": QUICK_RATE,
    f"{__name__}:quick2": QUICK2_RATE,
    f"{__name__}:long": LONG_RATE,
    f"{__name__}:shared_a": SHARED_A_RATE,
    f"{__name__}:shared_b": SHARED_B_RATE,
    f"{__name__}:every_minute": 60.0,
}


def _log() -> EvidenceLog:
    global _LOG  # noqa: PLW0603 - one log per process, opened on first use
    if _LOG is None:
        _LOG = EvidenceLog(Path(os.environ["FIREFLY_CHAOS_EVIDENCE"]))
    return _LOG


def _body(seconds: float) -> None:
    fire = current_fire()
    if fire is None:
        raise RuntimeError("a chaos task ran outside a fire")
    fields = {
        "node": fire.node,
        "target": fire.target,
        "lock": fire.lock_name,
        "instant": fire.instant.isoformat(),
        "attempt": fire.attempt,
        "token": fire.token,
    }
    _log().append("start", **fields)
    time.sleep(seconds)
    _log().append("end", lost=fire.lost, **fields)


@scheduled(fixed_rate=QUICK_RATE, lock=f"{PREFIX}-quick", lock_ttl=LOCK_TTL)
def quick() -> None:
    """1 ms body, ten fires a second."""
    _body(0.001)


@scheduled(fixed_rate=QUICK2_RATE, lock=f"{PREFIX}-quick2", lock_ttl=LOCK_TTL)
def quick2() -> None:
    """1 ms body, two fires a second."""
    _body(0.001)


@scheduled(fixed_rate=LONG_RATE, lock=f"{PREFIX}-long", lock_ttl=LOCK_TTL)
def long() -> None:
    """A body longer than its 1 s lease: only renewals keep it held."""
    _body(random.uniform(1.2, 2.5))


@scheduled(fixed_rate=SHARED_A_RATE, lock=f"{PREFIX}-shared", lock_ttl=LOCK_TTL)
def shared_a() -> None:
    """Shares its lock name with `shared_b`: their bodies must never overlap."""
    _body(random.uniform(0.05, 0.15))


@scheduled(fixed_rate=SHARED_B_RATE, lock=f"{PREFIX}-shared", lock_ttl=LOCK_TTL)
def shared_b() -> None:
    _body(random.uniform(0.02, 0.08))


@scheduled(cron="* * * * *", lock=f"{PREFIX}-cron", lock_ttl=LOCK_TTL)
def every_minute() -> None:
    """A cron task: one fire a minute."""
    _body(random.uniform(0.01, 0.5))
