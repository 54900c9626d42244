# Generated from base_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`BaseLock`: the behaviour every backend shares, written once.

Written once, for asyncio, in `locks/base_async.py`; the synchronous flavour in
`locks/base.py` is generated from it by `tools/async_to_sync.py`.

A backend subclasses it and implements only its round trips (`_acquire`,
`_release`, and optionally `_acquire_fenced`, `_renew`, `_claim`). Everything a user
relies on regardless of the server lives here: name and TTL validation, the
not-re-entrant bookkeeping, one `Holding` with a fresh owner token per acquisition
(`locks.holding`), driver-error translation with credentials scrubbed, and release
that never raises.

Capabilities are class attributes, gathered in `capabilities` and read through
`locks.port.capabilities_of` by the contract suite and the scheduler:

* `ttl_honoured`: the server frees the lock when the TTL passes (lease backends).
* `session_scoped`: the lock lives as long as the backend's connection (PostgreSQL,
  MySQL); the TTL is accepted and ignored.
* `cross_process`: the lock excludes other OS processes (False only in memory).
* `supports_fencing`: `try_acquire_fenced` returns fencing tokens.
* `renewable`: `renew` extends a lease (or checks a session still holds the lock).
* `batch_acquires`: `acquire_many` sends several acquisitions as one request (an
  instance attribute: the database backend batches on some dialects only).
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import ClassVar

from firefly_scheduling.errors import ConfigurationError, LockBackendError
from firefly_scheduling.locks.hold import hold
from firefly_scheduling.locks.holding import Holding, HoldingLedger, new_owner_token
from firefly_scheduling.locks.port import LockCapabilities
from firefly_scheduling.locks.validation import validate_lock_name, validate_ttl
from firefly_scheduling.urls.redaction import scrub

logger = logging.getLogger("firefly_scheduling.locks")

__all__ = ["BaseLock", "Holding", "new_owner_token"]


class BaseLock(ABC):
    """The port and its capabilities, implemented once; subclasses do the I/O."""

    backend_name: ClassVar[str] = "lock"
    ttl_honoured: ClassVar[bool] = True
    session_scoped: ClassVar[bool] = False
    cross_process: ClassVar[bool] = True
    supports_fencing: ClassVar[bool] = False
    renewable: ClassVar[bool] = False
    #: `acquire_many` sends its acquisitions as one request (set by the backend that can).
    batch_acquires: bool = False
    #: Driver exceptions that mean "the backend failed"; translated to LockBackendError.
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError,)

    def __init__(self, *, target: str = "", secrets: tuple[str, ...] = ()) -> None:
        # `target` is an already-redacted description of where the server is.
        self._target = target
        self._secrets = secrets
        self._ledger = HoldingLedger(ttl_honoured=self.ttl_honoured)

    @property
    def capabilities(self) -> LockCapabilities:
        """What this backend promises beyond the port (see the module doc)."""
        return LockCapabilities(
            ttl_honoured=self.ttl_honoured,
            session_scoped=self.session_scoped,
            cross_process=self.cross_process,
            fenced=self.supports_fencing,
            renewable=self.renewable,
            batch_acquires=self.batch_acquires,
        )

    # -- the port, by name --------------------------------------------------------------

    def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        """Win `name` now or return False; never waits for a holder to let go."""
        return self.acquire(name, ttl_seconds) is not None

    def try_acquire_fenced(self, name: str, ttl_seconds: float) -> int | None:
        """Like `try_acquire`, but return the fencing token of the new holding (or None).

        The token is strictly greater than every earlier token for `name` on this
        backend, so a guarded resource can refuse writes stamped with an older one.
        """
        holding = self.acquire(name, ttl_seconds, fenced=True)
        return None if holding is None else holding.fence

    def release(self, name: str) -> None:
        """Give back the current holding of `name` if this instance has one; else nothing.

        Never raises for a backend failure (it runs in `finally` blocks): the lock is
        then either gone with its session or will expire, and a warning says so. Code
        that holds a `Holding` should call `release_holding`, which can never free a
        newer holding of the same name.
        """
        holding = self._ledger.current(validate_lock_name(name))
        if holding is not None:
            self.release_holding(holding)

    def renew(self, name: str, ttl_seconds: float) -> bool:
        """Extend the current holding of `name` to `ttl_seconds` from now; False if gone."""
        holding = self._ledger.current(validate_lock_name(name))
        return holding is not None and self.renew_holding(holding, ttl_seconds)

    # -- holdings -----------------------------------------------------------------------

    def acquire(self, name: str, ttl_seconds: float, *, fenced: bool = False) -> Holding | None:
        """Take `name` now and return the new `Holding`, or None when it is taken.

        `fenced=True` gives the holding a fencing token (backends with fencing only).
        Raises `LockBackendError` when the backend fails.
        """
        if fenced and not self.supports_fencing:
            raise NotImplementedError(f"the {self.backend_name} backend has no fencing tokens")
        reservation = self._ledger.reserve(name, ttl_seconds)
        if reservation is None:
            return None
        won = False
        try:
            name, owner, ttl = reservation.name, reservation.owner, reservation.ttl_seconds
            try:
                if fenced:
                    fence = self._acquire_fenced(name, owner, ttl)
                    won = fence is not None
                else:
                    fence, won = None, self._acquire(name, owner, ttl)
            except ConfigurationError:
                raise
            except self.driver_errors as err:
                raise self._backend_error("acquiring", name, err) from err
            return self._ledger.record(reservation, fence) if won else None
        finally:
            if not won:
                self._ledger.abandon(reservation)

    def acquire_many(
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
                sent = self._acquire_many(wanted, fenced=fenced)
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

    def release_holding(self, holding: Holding) -> None:
        """Give back `holding` if it is still held; never raises for a backend failure.

        A lost holding is only forgotten: the server already let it go (and a newer
        holding of its name may exist, which a round trip must not touch). A release
        the server refuses (the lock is no longer this holding's) marks it lost, so
        that a fire runner reports the run it guarded as not exclusive.
        """
        if not self._ledger.begin_release(holding):
            return
        done = True
        try:
            if holding.lost:
                return
            try:
                confirmed = self._release(holding.name, holding.owner)
            except self.driver_errors as err:
                logger.warning(
                    "%s lock %r: release failed (%s); the lock is lost or will expire",
                    self.backend_name,
                    holding.name,
                    self._describe(err),
                )
                # Keep a lease that is still valid, so that a later release may free it early.
                done = not (self.ttl_honoured and not holding.lapsed())
                return
            if not confirmed:
                # The server no longer had it as ours: it lapsed or vanished (a restart)
                # while held, so a newer holder may have overlapped whoever ran under it.
                self._ledger.mark_lost([holding])
                logger.warning(
                    "%s lock %r was lost before release: another holder may have run meanwhile",
                    self.backend_name,
                    holding.name,
                )
        finally:
            self._ledger.end_release(holding, done=done)

    def renew_holding(self, holding: Holding, ttl_seconds: float) -> bool:
        """Extend `holding` to `ttl_seconds` from now; False when it was not extended.

        The server refusing (the owner token is gone) marks the holding lost. A backend
        error does not, while the lease may still run on the server: the next renewal
        may succeed. Once the lease has lapsed without a renewal, the holding is lost.
        Session backends check that their session still holds the lock instead.
        """
        ttl = validate_ttl(ttl_seconds)
        if holding.lost or holding.released:
            return False
        started = time.monotonic()
        try:
            kept = self._renew(holding.name, holding.owner, ttl)
        except self.driver_errors as err:
            logger.warning(
                "%s lock %r: renewal failed (%s)",
                self.backend_name,
                holding.name,
                self._describe(err),
            )
            if holding.lapsed():
                self._lose(holding, "its lease lapsed while renewals failed")
            return False
        if kept:
            holding.ttl_seconds = ttl
            self._ledger.renewed(holding, started)
            return True
        self._lose(holding, "the server no longer holds it for this owner")
        return False

    def try_claim(self, name: str, seconds: float) -> bool:
        """Take a fire claim on `name` for `seconds`: never released, never tracked here.

        Lease backends take an ordinary lease with a throwaway owner token, which the
        server frees at the end of the window. Session backends override `_claim`
        (a lock would die with the session; a claim must outlive it).
        """
        name = validate_lock_name(name)
        seconds = validate_ttl(seconds, source="claim seconds")
        try:
            return self._claim(name, seconds)
        except ConfigurationError:
            raise
        except self.driver_errors as err:
            raise self._backend_error("claiming", name, err) from err

    def try_claim_many(self, claims: Sequence[tuple[str, float]]) -> list[bool | LockBackendError]:
        """`try_claim` of each `(name, seconds)`, answered in order (`BatchClaimingLock`).

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
            sent = self._claim_many(unique)
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

    # -- local views, by name ------------------------------------------------------------

    def holding(self, name: str) -> Holding | None:
        """The current holding of `name` by this instance, whatever its state."""
        return self._ledger.current(validate_lock_name(name))

    def is_held(self, name: str) -> bool:
        """Whether this instance believes it holds `name` (local view, no round trip)."""
        holding = self._ledger.current(name)
        return holding is not None and holding.valid

    def is_lost(self, name: str) -> bool:
        """Whether the current holding of `name` was reported lost while it was held."""
        holding = self._ledger.current(name)
        return holding is not None and holding.lost

    def fencing_token(self, name: str) -> int | None:
        """The fencing token of the current holding of `name`, if it was acquired fenced."""
        holding = self._ledger.current(name)
        return None if holding is None else holding.fence

    @contextmanager
    def hold(self, name: str, ttl_seconds: float) -> Iterator[bool]:
        """`with lock.hold(name, ttl) as acquired:`; see `hold`."""
        with hold(self, name, ttl_seconds) as acquired:
            yield acquired

    def close(self) -> None:
        """Release every holding and drop connections; safe to call twice."""
        try:
            for holding in self._ledger.holdings():
                self.release_holding(holding)
        finally:
            self._close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._target!r})"

    # -- hooks for subclasses ---------------------------------------------------------

    @abstractmethod
    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        """One round trip: take `name` for `owner` unless someone holds it."""

    def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        """Acquire and return the new fencing token; override to do both in one round trip."""
        if not self._acquire(name, owner, ttl_seconds):
            return None
        try:
            return self._fence(name)
        except BaseException:
            try:
                self._release(name, owner)
            except self.driver_errors as err:  # keep the fence's error; the lease will expire
                logger.warning(
                    "%s lock %r: release after a failed fence failed too (%s)",
                    self.backend_name,
                    name,
                    self._describe(err),
                )
            raise

    @abstractmethod
    def _release(self, name: str, owner: str) -> bool:
        """Free `name` only if `owner` holds it; return whether it did."""

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        """Extend `owner`'s hold on `name`; return False if it no longer holds it."""
        raise NotImplementedError(f"the {self.backend_name} backend cannot renew leases")

    def _fence(self, name: str) -> int:
        """Increment and return the fencing counter of `name`."""
        raise NotImplementedError(f"the {self.backend_name} backend has no fencing tokens")

    def _claim(self, name: str, seconds: float) -> bool:
        """Take a claim for `seconds`; lease backends: a lease with a throwaway token."""
        if not self.ttl_honoured:
            raise NotImplementedError(
                f"the {self.backend_name} backend must implement fire claims (_claim)"
            )
        return self._acquire(name, new_owner_token(), seconds)

    def _claim_many(self, claims: Sequence[tuple[str, float]]) -> list[bool | BaseException]:
        """Take distinct claims: each answer, or the error that left it unknown.

        One after another here; a backend that sends them as one request overrides it.
        """
        answers: list[bool | BaseException] = []
        for name, seconds in claims:
            try:
                answers.append(self._claim(name, seconds))
            except ConfigurationError:
                raise
            except LockBackendError as err:
                answers.append(err)
            except self.driver_errors as err:
                answers.append(err)
        return answers

    def _acquire_many(
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
                    answers.append(self._acquire_fenced(name, owner, ttl_seconds))
                else:
                    answers.append(self._acquire(name, owner, ttl_seconds))
            except ConfigurationError:
                raise
            except self.driver_errors as err:
                answers.append(err)
        return answers

    def _close(self) -> None:  # noqa: B027 - optional hook; most backends hold no connection
        """Drop connections; the default has none."""

    # -- shared machinery -------------------------------------------------------------

    def _lose(self, holding: Holding, why: str) -> None:
        if self._ledger.mark_lost([holding]):
            logger.error("%s lock %r is lost: %s", self.backend_name, holding.name, why)

    def _backend_error(self, action: str, name: str, err: BaseException) -> LockBackendError:
        return LockBackendError(
            f"{self.backend_name} lock backend {self._target} failed while {action} "
            f"{name!r}: {self._describe(err)}"
        )

    def _describe(self, err: BaseException) -> str:
        text = scrub(str(err), self._secrets) or "no detail"
        return f"{type(err).__name__}: {text}"
