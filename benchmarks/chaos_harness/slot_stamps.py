"""The node's lock as its fire runner sees it, stamping every waiting slot it holds.

A fire of a `buffer_one` (or `buffer_all`) task waits for the task lock while it
holds a waiting slot (`firefly:overlap-waiting:<n>:<lock>`, `fires.overlap_wait`), so
"never two fires waiting at once" is "a slot never has two holders at once". Each
slot held is stamped twice: `slot_taken` once the server's answer granted it (it was
held from before that stamp, unless its lease had lapsed by then: `lapsed`, its node
stalled or the answer came late, and the fire gives it back unused) and `slot_given`
before the release is sent (it was still held, unless lost, up to that stamp). A
renewal the server refused or could not answer is stamped `slot_lost`: from then on
the slot may be another fire's; one renewed is stamped `slot_renewed` (a lease
lapses at the latest its TTL after the stamp of its last grant or renewal, whether
or not its holder learnt it).

Everything else reaches the real lock unchanged (attribute lookup falls through), as
`claim_stamps` does; this wraps the lock `claim_stamps` returns.
"""

from __future__ import annotations

from typing import cast

from chaos_harness.evidence import EvidenceLog
from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import DistributedLock, HoldingLock

#: The names of the waiting slots (`fires.overlap_names.waiting_slots`).
SLOT_PREFIX = "firefly:overlap-waiting:"


class SlotStamps:
    """`lock`, the waiting slots it grants, gives back and loses stamped on `evidence`."""

    def __init__(self, lock: HoldingLock, evidence: EvidenceLog) -> None:
        self._lock = lock
        self._evidence = evidence

    def __getattr__(self, name: str) -> object:
        return getattr(self._lock, name)

    def acquire(
        self, name: str, ttl_seconds: float, *, wait: float = 0.0, fenced: bool = False
    ) -> Holding | None:
        holding = self._lock.acquire(name, ttl_seconds, wait=wait, fenced=fenced)
        if holding is not None and name.startswith(SLOT_PREFIX):
            self._evidence.append(
                "slot_taken",
                slot=name,
                owner=holding.owner,
                ttl=ttl_seconds,
                lapsed=holding.lapsed(),
            )
        return holding

    def release_holding(self, holding: Holding) -> None:
        if holding.name.startswith(SLOT_PREFIX):
            lost = holding.lost or holding.lapsed()
            self._evidence.append("slot_given", slot=holding.name, owner=holding.owner, lost=lost)
        self._lock.release_holding(holding)

    def renew_holding(self, holding: Holding, ttl_seconds: float) -> bool:
        slot = holding.name.startswith(SLOT_PREFIX)
        try:
            renewed = self._lock.renew_holding(holding, ttl_seconds)
        except LockBackendError:
            if slot:
                self._evidence.append("slot_lost", slot=holding.name, owner=holding.owner)
            raise
        if slot:
            kind = "slot_renewed" if renewed else "slot_lost"
            self._evidence.append(kind, slot=holding.name, owner=holding.owner, ttl=ttl_seconds)
        return renewed


def stamping_slots(lock: DistributedLock, evidence: EvidenceLog) -> DistributedLock:
    """`lock` with its waiting slots stamped; itself when it hands out no holdings."""
    if isinstance(lock, HoldingLock):
        return cast(DistributedLock, SlotStamps(lock, evidence))
    return lock
