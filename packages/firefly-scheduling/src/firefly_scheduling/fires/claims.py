# Generated from claims_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""The claim stage: one acquisition that blocks every later attempt at a fire, never given back.

Written once, for asyncio, in `fires/claims_async.py`; `fires/claims.py` is generated
from it by `tools/async_to_sync.py`.

A lock released the moment a 1 ms body ends lets a node that wakes a second later
(its clock, or its scheduler, is late) run the same fire again. So before a locked
task runs, the node claims the FIRE, `(task, instant)`, and nobody ever gives that
claim back before the fire's window has passed:

* The claim is `ClaimingLock.try_claim` of a name derived from the task and the
  instant (`claim_name`): one round trip on every backend.
* Its window is `due + grace + clock_skew` on the claiming node's clock
  (`claim_seconds`), `due` being the instant plus the task's jitter offset
  (`Fire.due`; the instant itself without jitter). A node attempts a fire only
  while it is at most `grace` late by ITS clock (a catch-up fire: its task's
  `catchup=` window, when longer, `fires.catching_up`); a node whose clock runs `d`
  seconds slower than the claimer's may still attempt it `d` seconds after the
  claimer's window, so the window carries `clock_skew`, the largest clock
  difference between two nodes the fleet tolerates.
* Lease backends (Redis, memcached, database, memory) take the window as the TTL of
  an ordinary lease with a throwaway owner: the server frees it at the end.
* Session backends (PostgreSQL, MySQL) write a row with an expiry on the SERVER's
  clock in the adapter's own table: a session lock would die with the process (a
  `tick` exits at once; a restarted node loses its session), and would take a slot
  in the server's lock table for every fire of the window. Expired rows are swept.

So a claim outlives the process that took it on every backend, and "exactly once per
fire" holds with or without a run history.

`FireClaimer` is the stage: it claims a fire the decide stage let through (alone,
or a batch for `claim_many`), and hands a fire it won to the lock stage
(`fires.locking`). A claim lost ends the fire here: another node has it.

The claim is not the mutual exclusion between different fires of a task (the task
lock stays for that) and carries no fencing token (the task lock's does): a fencing
counter per fire would leave one counter row per fire on the server forever.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.fires.outcome import ClaimOutcome, Fire, FireResult, Verdict
from firefly_scheduling.locks.port import BatchClaimingLock, ClaimingLock
from firefly_scheduling.locks.validation import MAX_LOCK_NAME_LENGTH

if TYPE_CHECKING:
    from collections.abc import Callable

    from firefly_scheduling.fires.locking import TaskLocker
    from firefly_scheduling.fires.recording import RunRecorder
    from firefly_scheduling.fires.running import Body

logger = logging.getLogger("firefly_scheduling.fires")

#: Every claim name starts with it; lock names starting with `firefly:` are reserved.
CLAIM_PREFIX = "firefly:fire:"
_HASHED = "sha256:"
# Fixed width, so the instant part of a name can never run into the task part.
_STAMP_FORMAT = "%Y%m%dT%H%M%S.%fZ"


def claim_name(target: str, lock_name: str, instant: datetime, retry: int = 0) -> str:
    """The lock name claiming the fire of `target` at `instant`; identical on every node.

    `firefly:fire:<UTC instant to the microsecond>:<task>`. `instant` is a fire's,
    in UTC (`Fire.at` made it so); any other is refused rather than converted again,
    since a zone here would name another claim on every node. The task part is the
    target itself when the task's lock is named after it (`lock=True`) and the whole
    name fits in 255 characters; otherwise it is the SHA-256 of the pair
    (lock name, target), so that two tasks sharing a lock name still have one claim
    each per instant, and a lock name shared by two deployments' different tasks
    never merges their claims. A readable part never starts with `sha256:`, so the two
    forms cannot collide; a target that is not valid Unicode is hashed too.

    Retry `retry` of the fire (`fires.retries`; 0: the fire itself) is claimed as
    `firefly:fire:<instant>~retry<k>:<task>`: a claim of its own, so each retry runs
    once across the fleet, and no name of a fire's own claim (its stamp is followed
    by `:`) is ever one.
    """
    if instant.tzinfo is not UTC:
        raise ValueError(f"a claim names a fire's instant in UTC, got {instant.isoformat()}")
    stamp = instant.strftime(_STAMP_FORMAT)
    if retry:
        stamp = f"{stamp}~retry{retry}"
        return f"{CLAIM_PREFIX}{stamp}:{_task_part(target, lock_name, len(stamp) - _STAMP_WIDTH)}"
    return f"{CLAIM_PREFIX}{stamp}:{_task_part(target, lock_name)}"


# The stamp has a fixed width, so the prefix's length is known without an instant.
_STAMP_WIDTH = len("20000101T000000.000000Z")
_PREFIX_LENGTH = len(CLAIM_PREFIX) + _STAMP_WIDTH + len(":")


@functools.lru_cache(maxsize=4096)
def _task_part(target: str, lock_name: str, longer: int = 0) -> str:
    """The part of `claim_name` after the instant; the same for every fire of a task,
    so it is worked out once per task (a hash, or the checks of the readable form).
    `longer`: how much longer than a fire's the stamp before it is (a retry's)."""
    if (
        lock_name == target
        and not target.startswith(_HASHED)
        and _PREFIX_LENGTH + longer + len(target) <= MAX_LOCK_NAME_LENGTH
        and _is_text(target)
    ):
        return target
    # JSON of the pair is an unambiguous encoding of two arbitrary strings.
    identity = json.dumps([lock_name, target]).encode("ascii")
    return _HASHED + hashlib.sha256(identity).hexdigest()


def _is_text(name: str) -> bool:
    """Whether `name` is valid Unicode (no lone surrogate), as lock names must be."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def claim_seconds(instant: datetime, now: datetime, *, grace: float, clock_skew: float) -> float:
    """How long a claim taken at `now` must live: until `instant + grace + clock_skew`.

    `instant` is the fire's `due` time: a jittered fire is claimable until its offset
    plus grace, so its claim must live that long too.
    Both aware (the difference of two aware datetimes does not depend on their zones).
    Non-negative whenever the fire is still claimable (`now <= instant + grace`), and
    positive when `clock_skew > 0`; the runner treats a non-positive window as too late.
    """
    return (instant - now).total_seconds() + grace + clock_skew


class FireClaimer:
    """The claim stage of one runner; thread-safe.

    `claims` is the runner's lock seen through the claiming port; a fire won goes on
    to `locker`. Skips (the grace ran out, the backend failed) are written through
    `record`; results carry `node`.
    """

    def __init__(
        self,
        claims: ClaimingLock,
        locker: TaskLocker,
        *,
        record: RunRecorder,
        clock: Callable[[], datetime],
        grace: float,
        clock_skew: float,
        node: str,
    ) -> None:
        self._claims = claims
        self._batch_claims = claims if isinstance(claims, BatchClaimingLock) else None
        self._locker = locker
        self._record = record
        self._clock = clock
        self._grace = grace
        self._clock_skew = clock_skew
        self._node = node

    def claim_then_run(self, fire: Fire, body: Body, claim: ClaimOutcome | None) -> FireResult:
        """Claim `fire` (unless `claim_many` did: `claim`), and hand it on if won.

        An unlocked task's fire and a `fixed_delay` fire (its instant is this node's
        own) take no claim.
        """
        if claim is None and fire.task.lock_name is not None and fire.task.fixed_delay is None:
            started = time.perf_counter()
            [(verdict, error)] = self.claim_all([fire])
            claim = ClaimOutcome(verdict, time.perf_counter() - started, error=error)
        if claim is not None and claim.verdict is not Verdict.SUCCEEDED:
            return FireResult(
                fire, self._node, claim.verdict, error=claim.error, claim_seconds=claim.seconds
            )
        ahead, seconds = (None, None) if claim is None else (claim.task_lock, claim.seconds)
        return self._locker.lock_then_run(fire, body, ahead, seconds)

    def claim_all(
        self, fires: Sequence[Fire], *, patience: float | None = None
    ) -> list[tuple[Verdict, str | None]]:
        """Claim each fire: SUCCEEDED when won, else the status, each with the reason a
        fire not claimed gets in its result (None when won or claimed elsewhere).

        `patience` bounds the skip records' retries (see `FireDecider.claim_many`).
        """
        now = self._clock()
        windows = [
            claim_seconds(
                fire.due,
                now,
                grace=self._grace + fire.catchup_window,
                clock_skew=self._clock_skew,
            )
            for fire in fires
        ]
        requests = [
            (_claim_name_of(fire), seconds)
            for fire, seconds in zip(fires, windows, strict=True)
            if seconds > 0
        ]
        answers = iter(self._send(requests))
        verdicts: list[tuple[Verdict, str | None]] = []
        for fire, seconds in zip(fires, windows, strict=True):
            if seconds <= 0:  # grace ran out between the check and now (clock_skew == 0)
                reason = "the grace ran out before it could be claimed"
                self._record.skip(fire, reason, patience=patience)
                verdicts.append((Verdict.TOO_LATE, reason))
                continue
            answer = next(answers)
            if isinstance(answer, LockBackendError):
                logger.warning(
                    "%s: fire %s skipped: its claim failed: %s",
                    fire.target,
                    fire.instant.isoformat(),
                    answer,
                )
                # Harmless if another node runs it: a start replaces a skip.
                reason = f"the lock backend failed: {answer}"
                self._record.skip(fire, reason, patience=patience)
                verdicts.append((Verdict.BACKEND_ERROR, reason))
            elif not answer:
                if logger.isEnabledFor(logging.DEBUG):  # the common verdict: no isoformat
                    logger.debug(
                        "%s: fire %s is claimed elsewhere", fire.target, fire.instant.isoformat()
                    )
                verdicts.append((Verdict.CLAIMED_ELSEWHERE, None))
            else:
                verdicts.append((Verdict.SUCCEEDED, None))
        return verdicts

    def _send(self, requests: Sequence[tuple[str, float]]) -> list[bool | LockBackendError]:
        """Each claim's answer: one batch where the backend takes them, else one by one."""
        if len(requests) > 1 and self._batch_claims is not None:
            return self._batch_claims.try_claim_many(requests)
        answers: list[bool | LockBackendError] = []
        for name, seconds in requests:
            try:
                answers.append(self._claims.try_claim(name, seconds))
            except LockBackendError as err:
                answers.append(err)
        return answers


def _claim_name_of(fire: Fire) -> str:
    """The name of `fire`'s claim: its instant's, and its retry's for a retry."""
    retry = 0 if fire.retry is None else fire.retry.number
    return claim_name(fire.target, fire.task.lock_name or "", fire.instant, retry)
