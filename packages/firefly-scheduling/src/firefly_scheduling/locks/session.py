"""`SessionLock`: shared machinery of backends whose locks live in a server session.

PostgreSQL advisory locks and MySQL `GET_LOCK` belong to the connection that took
them: they vanish when it closes, and they are re-entrant within it. So such a
backend keeps one dedicated connection (never a pooled one, which would hand the
session to someone else) for as long as the instance lives, serialises its use
with a mutex, and treats any driver error as the loss of the session: every lock
it held is marked lost, and the next call reconnects.

A subclass supplies the connection and the statements; re-entrancy is already
refused by `BaseLock`'s bookkeeping before a statement is sent.
"""

from __future__ import annotations

import logging
import os
import threading
from abc import abstractmethod
from collections.abc import Callable
from typing import Generic, TypeVar

from firefly_scheduling.locks.base import BaseLock

logger = logging.getLogger("firefly_scheduling.locks")

ConnectionT = TypeVar("ConnectionT")
_R = TypeVar("_R")


class SessionLock(BaseLock, Generic[ConnectionT]):
    """A lock held by a dedicated server session; the TTL is accepted and ignored."""

    ttl_honoured = False
    session_scoped = True

    def __init__(self, *, target: str, secrets: tuple[str, ...] = ()) -> None:
        super().__init__(target=target, secrets=secrets)
        self._connection: ConnectionT | None = None
        self._connection_pid = os.getpid()
        self._connection_mutex = threading.RLock()

    # -- hooks ------------------------------------------------------------------

    @abstractmethod
    def _connect(self) -> ConnectionT:
        """Open the dedicated connection (autocommit, bounded connect timeout)."""

    @abstractmethod
    def _disconnect(self, connection: ConnectionT) -> None:
        """Close `connection`, ignoring errors: it may already be dead."""

    @abstractmethod
    def _server_acquire(self, connection: ConnectionT, name: str) -> bool:
        """Try the server lock for `name` without waiting."""

    @abstractmethod
    def _server_release(self, connection: ConnectionT, name: str) -> bool:
        """Release the server lock; False if this session did not hold it."""

    @abstractmethod
    def _server_holds(self, connection: ConnectionT, name: str) -> bool:
        """Whether this session still holds the server lock for `name`."""

    def _server_fence(self, connection: ConnectionT, name: str) -> int:
        """Increment and return the fencing counter of `name`."""
        raise NotImplementedError(f"the {self.backend_name} backend has no fencing tokens")

    # -- BaseLock hooks -----------------------------------------------------------

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        with self._connection_mutex:
            reused = self._connection is not None and not self._held_any()
            try:
                return self._use(lambda connection: self._server_acquire(connection, name))
            except self.driver_errors:
                if not reused:
                    raise
            # The idle connection died while it held nothing (a server restart, an idle
            # timeout): no lock was lost, so one fresh connection is tried at once
            # instead of skipping a run.
            return self._use(lambda connection: self._server_acquire(connection, name))

    def _release(self, name: str, owner: str) -> bool:
        with self._connection_mutex:
            if self._connection is None:
                return False  # the session died, and the lock with it
            return self._use(lambda connection: self._server_release(connection, name))

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        with self._connection_mutex:
            if self._connection is None:
                return False
            return self._use(lambda connection: self._server_holds(connection, name))

    def _fence(self, name: str) -> int:
        with self._connection_mutex:
            return self._use(lambda connection: self._server_fence(connection, name))

    def _close(self) -> None:
        with self._connection_mutex:
            if self._connection is not None:
                self._disconnect(self._connection)
                self._connection = None

    # -- machinery ----------------------------------------------------------------

    def _use(self, statement: Callable[[ConnectionT], _R]) -> _R:
        self._forget_inherited_connection()
        if self._connection is None:
            self._connection = self._connect()
            self._connection_pid = os.getpid()
        try:
            return statement(self._connection)
        except self.driver_errors:
            self._session_lost()
            raise

    def _held_any(self) -> bool:
        with self._state_mutex:
            return bool(self._held)

    def _forget_inherited_connection(self) -> None:
        """After a fork (gunicorn --preload, multiprocessing), the parent's session is not ours.

        Closing it would end the parent's session and free the parent's locks, so the
        child drops the reference without closing it and forgets the parent's leases.
        """
        if self._connection is None or self._connection_pid == os.getpid():
            return
        self._connection = None
        with self._state_mutex:
            self._held.clear()
            self._in_flight.clear()

    def _session_lost(self) -> None:
        """Drop the dead connection and mark every lock it held as lost."""
        if self._connection is not None:
            self._disconnect(self._connection)
            self._connection = None
        with self._state_mutex:
            lost = [lease for lease in self._held.values() if not lease.lost]
            for lease in lost:
                lease.lost = True
        for lease in lost:
            logger.error(
                "%s lock %r is lost: its session %s ended",
                self.backend_name,
                lease.name,
                self._target,
            )
