# Generated from session_asks_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`SessionAsks`: keep-alive checks and releases of one session, answered together.

A middle layer of `SessionLock` (`locks.session_async`). The session runs one
statement at a time, so the checks before the bodies of an instant's fires (a batch
took their locks on one session) and their releases after queued behind each other,
one round trip each. Whoever takes the session's mutex next sends every ask waiting
then (`Ask`), one statement for the checks and one for the releases, and leaves each
waiter its own answer from the server: each lock is still checked and released by
name, only in company.

Written once, for asyncio; `locks/session_asks.py` is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Generic

from firefly_scheduling.concurrency.pool_size import PoolExhaustedError
from firefly_scheduling.locks.session_pool import (
    Ask,
    AskKey,
    ConnectionT,
    PooledSession,
    SessionPool,
)

logger = logging.getLogger("firefly_scheduling.locks")

#: Sends one statement for some names; one answer per name.
_SendNames = Callable[[Sequence[str]], list[bool]]

#: Names per statement when a batch of checks or releases is sent (a SELECT list).
ASKS_PER_STATEMENT = 500


class SessionAsks(SessionPool[ConnectionT], Generic[ConnectionT]):
    """Releases and keep-alive checks of holdings, each on the session that holds it."""

    @abstractmethod
    def _server_holds(self, connection: ConnectionT, name: str) -> bool:
        """Whether this session still holds the server lock for `name`."""

    def _release(self, name: str, owner: str) -> bool:
        session = self._owner_sessions.pop(owner, None)
        if session is None:
            return False  # the session died, and the lock with it
        generation = session.generation
        key = (owner, True)
        session.asks[key] = Ask(name, generation)
        try:
            self._take(session.mutex)
        except PoolExhaustedError as err:
            answer = self._withdraw(session, key)
            if answer is not None:
                return answer
            if session.generation == generation and owner in session.owners:
                session.owners.discard(owner)
                session.queue_unlock(name)
            self._warn_release_queued(name, err)
            return True
        try:
            return self._answer(session, key, Ask(name, generation))
        finally:
            session.mutex.release()

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        session = self._owner_sessions.get(owner)
        if session is None:
            return False
        generation = session.generation
        key = (owner, False)
        session.asks[key] = Ask(name, generation)
        try:
            self._take(session.mutex)
        except PoolExhaustedError as err:
            answer = self._withdraw(session, key)
            if answer is not None:
                return answer
            # Busy, not gone: an ended session would have forgotten the owner.
            self._warn_check_failed(name, err)
            return session.generation == generation and owner in session.owners
        try:
            return self._answer(session, key, Ask(name, generation))
        finally:
            session.mutex.release()

    # -- checks and releases, answered together (`Ask`) ---------------------------------

    def _withdraw(self, session: PooledSession[ConnectionT], key: AskKey) -> bool | None:
        """A caller gives up waiting: its answer if a batch gave one already, else None."""
        session.asks.pop(key, None)
        return session.answers.pop(key, None)

    def _answer(self, session: PooledSession[ConnectionT], key: AskKey, ask: Ask) -> bool:
        """The answer to `ask` (the session's mutex held): a batch's, or our own batch's.

        A batch that failed part-way (a bug, a cancellation) left the asks it took
        without an answer; such an ask is put back and sent in this batch.
        """
        answer = session.answers.pop(key, None)
        if answer is not None:
            session.asks.pop(key, None)
            return answer
        session.asks.setdefault(key, ask)
        self._send_asks(session)
        return session.answers.pop(key)

    def _serve_asks(self, session: PooledSession[ConnectionT]) -> None:
        self._send_asks(session)

    def _send_asks(self, session: PooledSession[ConnectionT]) -> None:
        """Send every waiting ask: the checks in one statement, then the releases in one.

        An ask of a holding the session no longer carries (its session ended, it was
        released) is answered False without a statement. Each answer is left in
        `session.answers` for its caller.
        """
        asks, session.asks = session.asks, {}
        checks: list[tuple[AskKey, Ask]] = []
        releases: list[tuple[AskKey, Ask]] = []
        for key, ask in asks.items():
            owner, releasing = key
            if owner not in session.owners or session.generation != ask.generation:
                session.answers[key] = False
            else:
                (releases if releasing else checks).append((key, ask))
        if checks:
            self._check_all(session, checks)
        if releases:
            self._release_all(session, releases)

    def _check_all(
        self, session: PooledSession[ConnectionT], checks: list[tuple[AskKey, Ask]]
    ) -> None:
        names = [ask.name for _, ask in checks]
        generation = session.generation
        try:
            held = self._run(
                session,
                lambda connection: self._server_holds_all(connection, names),
                retry=False,
            )
        except self.driver_errors as err:
            ended = session.generation != generation  # and every lock of it
            for key, ask in checks:
                if not ended:
                    # A session lock lives as long as its session, which is still there.
                    self._warn_check_failed(ask.name, err)
                session.answers[key] = not ended
            return
        for (key, _), answer in zip(checks, held, strict=True):
            session.answers[key] = answer

    def _release_all(
        self, session: PooledSession[ConnectionT], releases: list[tuple[AskKey, Ask]]
    ) -> None:
        names = [ask.name for _, ask in releases]
        generation = session.generation
        try:
            released = self._run(
                session,
                lambda connection: self._server_release_all(connection, names),
                retry=False,
            )
        except self.driver_errors as err:
            if session.generation != generation:
                # The session had ended, and the server freed the locks with it while
                # they were held: another node may have run meanwhile. The owners were
                # still the session's, so the session's end marked their holdings lost.
                for key, _ in releases:
                    session.answers[key] = False
                return
            for key, ask in releases:
                session.owners.discard(key[0])
                session.queue_unlock(ask.name)
                self._warn_release_queued(ask.name, err)
                session.answers[key] = True
            return
        for (key, _), answer in zip(releases, released, strict=True):
            session.owners.discard(key[0])
            session.answers[key] = answer

    def _server_holds_all(self, connection: ConnectionT, names: Sequence[str]) -> list[bool]:
        """`_server_holds` of each name: one statement per `ASKS_PER_STATEMENT` names."""
        if len(names) == 1:
            return [self._server_holds(connection, names[0])]
        return _in_chunks(names, lambda chunk: self._server_holds_many(connection, chunk))

    def _server_release_all(self, connection: ConnectionT, names: Sequence[str]) -> list[bool]:
        """`_server_release` of each name: one statement per `ASKS_PER_STATEMENT` names."""
        if len(names) == 1:
            return [self._server_release(connection, names[0])]
        return _in_chunks(names, lambda chunk: self._server_release_many(connection, chunk))

    def _server_holds_many(self, connection: ConnectionT, names: Sequence[str]) -> list[bool]:
        """`_server_holds` of each of the distinct `names`; one statement each unless
        overridden."""
        return [self._server_holds(connection, name) for name in names]

    def _server_release_many(self, connection: ConnectionT, names: Sequence[str]) -> list[bool]:
        """`_server_release` of each of the distinct `names`, in order; one statement
        each unless overridden."""
        return [self._server_release(connection, name) for name in names]

    def _warn_check_failed(self, name: str, err: BaseException) -> None:
        logger.warning(
            "%s lock %r: checking the session's hold failed (%s); the session is alive, so "
            "it still holds the lock",
            self.backend_name,
            name,
            self._describe(err),
        )


def _in_chunks(names: Sequence[str], send: _SendNames) -> list[bool]:
    """`send` of each `ASKS_PER_STATEMENT` names in turn, their answers in order."""
    answers: list[bool] = []
    for start in range(0, len(names), ASKS_PER_STATEMENT):
        answers.extend(send(names[start : start + ASKS_PER_STATEMENT]))
    return answers
