"""The node's lock as its fire runner sees it, stamping every fire claim it wins.

A volatile server's restart empties the claims made on it, so a second node may win
a fire's claim again: the checker excuses that rerun only when a restart came
between the two claims. The body's `start` stamp is too late a bound for the first
claim: a node may claim, take the task lock, then wait (a hanging history write)
while the server restarts and answers again, all before its body starts. So every
claim won is stamped (`claimed`, with its name) the moment its answer arrives: the
claim was written on the server before that stamp.

Everything else reaches the real lock unchanged (attribute lookup falls through), so
the runner finds the same ports and capabilities, and batches claims where the real
lock does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from chaos_harness.evidence import EvidenceLog
from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.port import BatchClaimingLock, ClaimingLock, DistributedLock


class ClaimStamps:
    """`lock`, its won claims stamped on `evidence`."""

    def __init__(self, lock: ClaimingLock, evidence: EvidenceLog) -> None:
        self._lock = lock
        self._evidence = evidence

    def __getattr__(self, name: str) -> object:
        return getattr(self._lock, name)

    def try_claim(self, name: str, seconds: float) -> bool:
        won = self._lock.try_claim(name, seconds)
        if won:
            self._evidence.append("claimed", name=name)
        return won


class BatchClaimStamps(ClaimStamps):
    """`ClaimStamps` of a lock that takes several claims in one request."""

    def __init__(self, lock: BatchClaimingLock, evidence: EvidenceLog) -> None:
        super().__init__(cast(ClaimingLock, lock), evidence)
        self._batch = lock

    def try_claim_many(self, claims: Sequence[tuple[str, float]]) -> list[bool | LockBackendError]:
        answers = self._batch.try_claim_many(claims)
        for (name, _seconds), answer in zip(claims, answers, strict=True):
            if answer is True:
                self._evidence.append("claimed", name=name)
        return answers


def stamping_claims(lock: DistributedLock, evidence: EvidenceLog) -> DistributedLock:
    """`lock` with its won claims stamped; itself when it takes no claims."""
    if isinstance(lock, BatchClaimingLock) and isinstance(lock, ClaimingLock):
        return cast(DistributedLock, BatchClaimStamps(lock, evidence))
    if isinstance(lock, ClaimingLock):
        return cast(DistributedLock, ClaimStamps(lock, evidence))
    return lock
