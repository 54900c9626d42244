"""The session-loss contract: what a session lock does when the server ends its session.

A session backend (PostgreSQL advisory locks, MySQL named locks) holds a name for as
long as the server session that took it lives. When the server ends that session (a
restart, a failover, an administrator's kill), every holding of it is lost, another
node may take the name at once, and the instance must say so and recover:

- the loss is reported (`renew` is False, `is_lost`, an error in the log), never
  hidden, and the call that meets the dead session raises `LockBackendError`;
- the lost holding's late release frees nothing a newer holder took, on this
  instance's next session or on another node;
- the next call reconnects; a fenced name's next token is still higher.

A backend plugs in with `lock_factory` (as for `LockContract`) and `session_killer`:
a callable ending, from a second client of the server, the one session that holds a
name (never anyone else's). Written once, for asyncio;
`testing/session_loss_contract.py` is generated from it by `tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncSessionLossContract SessionLossContract
# async-to-sync: rename AsyncNodeFixtures NodeFixtures

from __future__ import annotations

import asyncio  # sync: drop
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.port import LockCapabilities
from firefly_scheduling.testing.nodes_async import AsyncNodeFixtures, AsyncNodes, holdings_of

#: Longest the server may take to free the locks of a session it ended.
SESSION_END_SECONDS = 10.0

Killer = Callable[[str], None]


class AsyncSessionLossContract(AsyncNodeFixtures):
    """Cases every session lock must pass when the server ends its session."""

    @pytest.fixture
    def session_killer(self) -> Killer:
        """Ends the server session holding a name; a backend overrides it."""
        pytest.skip("the backend supplies no session_killer")

    @pytest.fixture(autouse=True)
    def _lock_logs(self, caplog: pytest.LogCaptureFixture) -> None:
        """The loss must be logged: keep the locks' warnings for the cases to read."""
        caplog.set_level(logging.WARNING, logger="firefly_scheduling")

    @staticmethod
    async def _end_session(kill: Killer, nodes: AsyncNodes, name: str) -> None:
        """End the session holding `name`; return once another session can win it."""
        await asyncio.to_thread(kill, name)  # sync: kill(name)
        probe = nodes()
        deadline = time.monotonic() + SESSION_END_SECONDS
        while not await probe.try_acquire(name, 30):
            assert time.monotonic() < deadline, "the ended session kept its lock"
            await asyncio.sleep(0.02)
        await probe.release(name)

    async def test_renew_reports_the_loss_and_the_late_release_frees_no_new_holder(
        self, nodes: AsyncNodes, name: str, session_killer: Killer, caplog: pytest.LogCaptureFixture
    ) -> None:
        lock: Any = nodes()  # a session lock: `renew`, `is_lost`, `is_held` besides the port
        other = nodes()
        assert await lock.try_acquire(name, 30)
        assert await lock.renew(name, 30) is True
        await self._end_session(session_killer, nodes, name)

        assert await lock.renew(name, 30) is False, "renew must see the session's end"
        assert lock.is_lost(name)
        assert lock.is_held(name) is False
        assert f"lock {name!r} is lost" in caplog.text

        assert await other.try_acquire(name, 30), "the server freed the lock with the session"
        await lock.release(name)  # never raises, and must not free the new holder
        assert await lock.try_acquire(name, 30) is False, "a fresh session is refused"
        await other.release(name)
        assert await lock.try_acquire(name, 30), "the instance reconnected"
        await lock.release(name)

    async def test_a_lost_holdings_late_release_never_frees_the_newer_holding_of_the_new_session(
        self, nodes: AsyncNodes, name: str, session_killer: Killer
    ) -> None:
        """The instance takes the name again on its next session; the old holding is dead."""
        lock, other = holdings_of(nodes()), nodes()
        first = await lock.acquire(name, 30)
        assert first is not None
        await self._end_session(session_killer, nodes, name)
        assert await lock.renew_holding(first, 30) is False  # the loss is noticed
        assert first.lost
        second = await lock.acquire(name, 30)
        assert second is not None, "the instance takes the name again on a new session"
        await lock.release_holding(first)  # the old holding's late release
        assert await lock.renew_holding(first, 30) is False
        assert await other.try_acquire(name, 30) is False, (
            "a lost holding's release freed the newer"
        )
        assert await lock.renew_holding(second, 30) is True
        await lock.release_holding(second)
        assert await other.try_acquire(name, 30)
        await other.release(name)

    async def test_the_next_call_raises_marks_the_lock_lost_and_the_one_after_reconnects(
        self, nodes: AsyncNodes, name: str, session_killer: Killer, caplog: pytest.LogCaptureFixture
    ) -> None:
        lock: Any = nodes()
        other, third = nodes(), nodes()
        assert await lock.try_acquire(name, 30)
        await self._end_session(session_killer, nodes, name)

        with pytest.raises(LockBackendError) as caught:
            await lock.try_acquire(name + ":next", 30)
        assert isinstance(caught.value.__cause__, lock.driver_errors), caught.value.__cause__
        assert lock.is_lost(name)
        assert await lock.renew(name, 30) is False
        assert f"lock {name!r} is lost" in caplog.text

        assert await other.try_acquire(name, 30), "the server freed the lock with the session"
        assert await lock.try_acquire(name + ":next", 30), "the call after the failure reconnects"
        assert await third.try_acquire(name + ":next", 30) is False
        await lock.release(name)  # the lost holding: forgotten, and other keeps the name
        assert await third.try_acquire(name, 30) is False, "a lost holding's release freed other"
        await lock.release(name + ":next")
        await other.release(name)

    async def test_a_release_on_a_dead_session_reports_the_holding_lost_not_an_error(
        self, nodes: AsyncNodes, name: str, session_killer: Killer, caplog: pytest.LogCaptureFixture
    ) -> None:
        lock: Any = nodes()
        other = nodes()
        assert await lock.try_acquire(name, 30)
        holding = lock.holding(name)
        assert holding is not None
        await self._end_session(session_killer, nodes, name)

        await lock.release(name)
        # The server freed it while it was held: lost, not released (another may have run).
        assert holding.lost
        assert "ended" in caplog.text, "the session's end is named as the cause"
        assert "was lost before release" in caplog.text
        assert lock.is_held(name) is False
        assert await lock.try_acquire(name, 30), "after the release the instance may take it again"
        assert await other.try_acquire(name, 30) is False
        await lock.release(name)
        assert await other.try_acquire(name, 30)
        await other.release(name)

    async def test_a_fenced_acquire_on_a_dead_session_raises_then_the_next_token_is_higher(
        self,
        nodes: AsyncNodes,
        name: str,
        session_killer: Killer,
        capabilities: LockCapabilities,
    ) -> None:
        if not capabilities.fenced:
            pytest.skip("backend declares no fencing tokens")
        lock: Any = nodes()
        first = await lock.try_acquire_fenced(name, 30)
        assert first is not None
        await self._end_session(session_killer, nodes, name)

        with pytest.raises(LockBackendError):
            await lock.try_acquire_fenced(name + ":next", 30)
        await lock.release(name)
        second = await lock.try_acquire_fenced(name, 30)
        assert second is not None
        assert second > first
        await lock.release(name)
