"""`FireObserver`: how a host tells others about every fire it handled.

Every host (resident, cron-driven, library, asyncio) turns a trigger into a `Fire`
and hands it to `execute_fire` (`hosts.runtime.execute`, `hosts.runtime.execute_async`), which tells
each observer the `FireResult` (`fires.outcome`): the fire log, the `tick` report,
an application's own. This module imports only `fires.outcome`, so the runtime, the
boot code and `execute_fire` can all name an observer without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from firefly_scheduling.fires.outcome import ClaimOutcome, Fire, FireResult


class FireObserver(Protocol):
    """Told about every fire a host handled; must be quick, and should not raise."""

    def fire_finished(self, result: FireResult) -> None: ...


@dataclass(frozen=True, slots=True)
class PreclaimedFire:
    """A fire its host admitted and claimed before the job ran (`hosts.apscheduler.claim_first`).

    `admission` is the runtime's in-flight ticket (`RuntimeBase.admit`): the fire
    counts as in flight from before its claim, so a shutdown waits for a claim won.
    """

    fire: Fire
    claim: ClaimOutcome
    admission: int
