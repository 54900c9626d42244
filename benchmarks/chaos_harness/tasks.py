"""The task mix the node processes run (`--app chaos_harness.tasks`).

Every body appends a `start` event before its work and an `end` event after it to
the evidence log (`FIREFLY_CHAOS_EVIDENCE`), with what `current_fire()` says: the
instant, attempt, fencing token, at the start whether the fire was caught up, and at
the end whether the lock was reported lost. The policy tasks (`policy_tasks`) share
these bodies.
Lock names carry `FIREFLY_CHAOS_PREFIX`, unique per run, because the SQL servers are
shared.

The mix: 1 ms bodies; a body longer than its `lock_ttl` (kept alive by
renewals); two tasks sharing one lock name; `fixed_rate` and cron tasks.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping
from pathlib import Path

from chaos_harness.evidence import EvidenceLog
from firefly_scheduling import current_fire, scheduled
from firefly_scheduling.fires.context import FireContext

PREFIX = os.environ.get("FIREFLY_CHAOS_PREFIX", "chaos")
#: Every task's lease: short, so a SIGSTOP of a few seconds outlives it.
LOCK_TTL = "1s"
_LOG: EvidenceLog | None = None
#: How often a body looks at `current_fire().lost` while it works.
LOST_POLL_SECONDS = 0.02
#: Seconds between fires at pace 1, epoch-aligned; the cron task fires every minute.
RATES = {"quick": 0.1, "quick2": 0.5, "long": 2.0, "shared_a": 1.0, "shared_b": 0.7}
#: `FIREFLY_CHAOS_PACE` stretches every rate (2 = half as many fires): a loaded
#: machine runs fewer fires rather than passing most of them over.
PACE = float(os.environ.get("FIREFLY_CHAOS_PACE", "1"))


def schedules(pace: float) -> dict[str, float]:
    """Every task's target and period at `pace`: the fires the checker expects."""
    periods = {f"{__name__}:{name}": rate * pace for name, rate in RATES.items()}
    return {**periods, f"{__name__}:every_minute": 60.0}


def _rate(name: str) -> float:
    return RATES[name] * PACE


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
    _log().append("start", caught_up=fire.caught_up, **fields)
    _work(seconds, fire, fields)
    _log().append("end", lost=fire.lost, **fields)


def _work(seconds: float, fire: FireContext, fields: Mapping[str, object]) -> None:
    """Sleep `seconds`, watching `fire.lost` as a careful long body would.

    The moment the node marks the lock lost, a `lost` event is stamped: a node
    killed before the body's end would otherwise take that knowledge with it, and
    the checker would see an overlap with a holder that never said it was lost
    (seed 120403: a session ended, or a lease lapsed on a loaded node, then the
    node was killed mid-body).
    """
    deadline = time.monotonic() + seconds
    reported = False
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, LOST_POLL_SECONDS))
        if fire.lost and not reported:
            _log().append("lost", **fields)
            reported = True


@scheduled(fixed_rate=_rate("quick"), lock=f"{PREFIX}-quick", lock_ttl=LOCK_TTL)
def quick() -> None:
    """1 ms body, ten fires a second (at pace 1)."""
    _body(0.001)


@scheduled(fixed_rate=_rate("quick2"), lock=f"{PREFIX}-quick2", lock_ttl=LOCK_TTL)
def quick2() -> None:
    """1 ms body, two fires a second (at pace 1)."""
    _body(0.001)


@scheduled(fixed_rate=_rate("long"), lock=f"{PREFIX}-long", lock_ttl=LOCK_TTL)
def long() -> None:
    """A body longer than its 1 s lease: only renewals keep it held."""
    _body(random.uniform(1.2, 2.5))


@scheduled(fixed_rate=_rate("shared_a"), lock=f"{PREFIX}-shared", lock_ttl=LOCK_TTL)
def shared_a() -> None:
    """Shares its lock name with `shared_b`: their bodies must never overlap."""
    _body(random.uniform(0.05, 0.15))


@scheduled(fixed_rate=_rate("shared_b"), lock=f"{PREFIX}-shared", lock_ttl=LOCK_TTL)
def shared_b() -> None:
    _body(random.uniform(0.02, 0.08))


@scheduled(cron="* * * * *", lock=f"{PREFIX}-cron", lock_ttl=LOCK_TTL)
def every_minute() -> None:
    """A cron task: one fire a minute."""
    _body(random.uniform(0.01, 0.5))
