"""`AsyncClaimsAndBatches`: fire claims, and acquisitions sent together.

A middle layer of `AsyncBaseLock` (`locks.base_async`): a fire claim is a hold that is
never given back and outlives the process (`fires.claims`), and a resident host takes
the claims and task locks of one instant together, in one request where the backend
can (`capabilities.batch_acquires`). Each answer stays its own: one claim's error
fails no other, and an error is never read as "taken".

Written once, for asyncio; `locks/base_claims.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncBackendHooks BackendHooks
# async-to-sync: rename AsyncClaimsAndBatches ClaimsAndBatches

from __future__ import annotations

from collections.abc import Sequence

from firefly_scheduling.errors import ConfigurationError, LockBackendError
from firefly_scheduling.locks.backend_hooks_async import AsyncBackendHooks
from firefly_scheduling.locks.holding import Holding, new_owner_token
from firefly_scheduling.locks.validation import validate_lock_name, validate_ttl


class AsyncClaimsAndBatches(AsyncBackendHooks):
    """Fire claims (`AsyncClaimingLock`) and batches (`AsyncBatchAcquiringLock`)."""

    async def acquire_many(
        self, requests: Sequence[tuple[str, float]], *, fenced: bool = False
    ) -> list[Holding | LockBackendError | None]:
        """`acquire` of each `(name, ttl_seconds)`, answered in order, each on its own.

        Sent as one request where the backend can (`capabilities.batch_acquires`: the
        resident host then takes the task locks of the fires it won with their claims,
        so a won fire's worker sends no acquisition of its own), else one after
        another. An answer is the new `Holding`; None when the name is taken, or was
        given earlier in `requests` (a lock is not re-entrant); or the
        `LockBackendError` that left that acquisition unknown, which fails no other.
        Bad names and TTLs raise before anything is sent.
        """
        if fenced and not self.supports_fencing:
            raise NotImplementedError(f"the {self.backend_name} backend has no fencing tokens")
        for name, ttl_seconds in requests:
            validate_lock_name(name)
            validate_ttl(ttl_seconds)
        answers: list[Holding | LockBackendError | None] = [None] * len(requests)
        reserved = [
            (index, reservation)
            for index, (name, ttl_seconds) in enumerate(requests)
            if (reservation := self._ledger.reserve(name, ttl_seconds)) is not None
        ]
        recorded: set[int] = set()
        try:
            if not reserved:
                return answers
            wanted = [(r.name, r.owner, r.ttl_seconds) for _, r in reserved]
            try:
                sent = await self._acquire_many(wanted, fenced=fenced)
            except ConfigurationError:
                raise
            except self.driver_errors as err:
                sent = [err] * len(wanted)
            for (index, reservation), answer in zip(reserved, sent, strict=True):
                if isinstance(answer, BaseException):
                    answers[index] = self._as_error("acquiring", reservation.name, answer)
                elif fenced and answer is not None:
                    answers[index] = self._ledger.record(reservation, int(answer))
                    recorded.add(index)
                elif not fenced and answer:
                    answers[index] = self._ledger.record(reservation)
                    recorded.add(index)
            return answers
        finally:
            for index, reservation in reserved:
                if index not in recorded:
                    self._ledger.abandon(reservation)

    async def try_claim(self, name: str, seconds: float) -> bool:
        """Take a fire claim on `name` for `seconds`: never released, never tracked here.

        Lease backends take an ordinary lease with a throwaway owner token, which the
        server frees at the end of the window. Session backends override `_claim`
        (a lock would die with the session; a claim must outlive it).
        """
        name = validate_lock_name(name)
        seconds = validate_ttl(seconds, source="claim seconds")
        try:
            return await self._claim(name, seconds)
        except ConfigurationError:
            raise
        except self.driver_errors as err:
            raise self._backend_error("claiming", name, err) from err

    async def try_claim_many(
        self, claims: Sequence[tuple[str, float]]
    ) -> list[bool | LockBackendError]:
        """`try_claim` of each `(name, seconds)`, answered in order (`AsyncBatchClaimingLock`).

        Sent together where the backend can (`_claim_many`). A name given twice is
        claimed once: its later entries lose, as a second claim of it would. A
        failure is the answer of the claims it left unknown, never read as lost.
        """
        checked = [
            (validate_lock_name(name), validate_ttl(seconds, source="claim seconds"))
            for name, seconds in claims
        ]
        windows: dict[str, float] = {}
        for name, seconds in checked:
            windows.setdefault(name, seconds)  # each name once, with its first window
        unique = list(windows.items())
        try:
            sent = await self._claim_many(unique)
        except ConfigurationError:
            raise
        except self.driver_errors as err:
            sent = [err] * len(unique)
        answers = {
            name: answer if isinstance(answer, bool) else self._as_error("claiming", name, answer)
            for (name, _), answer in zip(unique, sent, strict=True)
        }
        seen: set[str] = set()
        replies: list[bool | LockBackendError] = []
        for name, _ in checked:
            replies.append(answers[name] if name not in seen else False)
            seen.add(name)
        return replies

    def _as_error(self, action: str, name: str, error: BaseException) -> LockBackendError:
        if isinstance(error, LockBackendError):
            return error
        return self._backend_error(action, name, error)

    async def _claim(self, name: str, seconds: float) -> bool:
        """Take a claim for `seconds`; lease backends: a lease with a throwaway token."""
        if not self.ttl_honoured:
            raise NotImplementedError(
                f"the {self.backend_name} backend must implement fire claims (_claim)"
            )
        return await self._acquire(name, new_owner_token(), seconds)

    async def _claim_many(self, claims: Sequence[tuple[str, float]]) -> list[bool | BaseException]:
        """Take distinct claims: each answer, or the error that left it unknown.

        One after another here; a backend that sends them as one request overrides it.
        """
        answers: list[bool | BaseException] = []
        for name, seconds in claims:
            try:
                answers.append(await self._claim(name, seconds))
            except ConfigurationError:
                raise
            except LockBackendError as err:
                answers.append(err)
            except self.driver_errors as err:
                answers.append(err)
        return answers

    async def _acquire_many(
        self, requests: Sequence[tuple[str, str, float]], *, fenced: bool
    ) -> list[int | bool | BaseException | None]:
        """Acquire each distinct `(name, owner, ttl_seconds)`: its answer, or the error that
        left it unknown. Fenced: the new token, or None when taken; else won or not.

        One after another here; a backend that sends them as one request overrides it
        and says so in `batch_acquires`.
        """
        answers: list[int | bool | BaseException | None] = []
        for name, owner, ttl_seconds in requests:
            try:
                if fenced:
                    answers.append(await self._acquire_fenced(name, owner, ttl_seconds))
                else:
                    answers.append(await self._acquire(name, owner, ttl_seconds))
            except ConfigurationError:
                raise
            except self.driver_errors as err:
                answers.append(err)
        return answers
