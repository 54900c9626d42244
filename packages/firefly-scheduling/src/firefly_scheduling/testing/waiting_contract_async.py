"""The waiting contract: acquisitions that wait, written once for both flavours.

A waiter wakes when the holder releases, gives up at its timeout leaving nothing
behind, is served in arrival order (within an instance, and across processes where
the backend declares it), never blocks the queue once killed, and, cancelled or
interrupted, leaves no waiter on the server. Mixed into `AsyncLockContract`
(`contract_async`), so every backend runs it with the fixtures it already supplies
(`nodes`, `name`, `capabilities`, `lock_factory`, and `waiters_on_server` or
`queued_on_server` where a second client can count the waiters). Each claim is
checked from outside the instance under test: a second instance (another
connection, as another node would be), child processes and the signals sent to
them, and the kernel's monotonic clock.

Keep-alive and leadership are `leadership_contract_async`'s.

Written once, for asyncio; `testing/waiting_contract.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncWaitingContract WaitingContract

from __future__ import annotations

import asyncio  # sync: drop
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import LockCapabilities
from firefly_scheduling.testing.attempt_counter import AttemptCounter
from firefly_scheduling.testing.leader_workers import (
    interrupted_waiter,
    queued_waiter,
    read_events,
)
from firefly_scheduling.testing.nodes_async import EXPIRY_SLACK_SECONDS
from firefly_scheduling.testing.workers import child_processes


def _acquirer(lock: Any) -> Any:
    assert hasattr(lock, "acquire"), f"{lock!r} hands out no holdings"
    return lock


class _Background:
    """A call running beside the case: an asyncio task, or a thread."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.result: Any = None
        if ASYNC:
            self._task = asyncio.ensure_future(call())
        else:
            self._error: BaseException | None = None

            def run() -> None:
                try:
                    self.result = call()
                except BaseException as err:  # noqa: BLE001 - handed to the case
                    self._error = err

            self._thread = threading.Thread(target=run, daemon=True)
            self._thread.start()

    async def outcome(self, timeout: float) -> Any:
        if ASYNC:
            self.result = await asyncio.wait_for(self._task, timeout)
        else:
            self._thread.join(timeout)
            assert not self._thread.is_alive(), f"the call did not end within {timeout} s"
            if self._error is not None:
                raise self._error
        return self.result


async def _pause(seconds: float) -> None:
    await asyncio.sleep(seconds)


class AsyncWaitingContract:
    """Waiting acquisition, proven on the real server."""

    # -- waiting ----------------------------------------------------------------

    async def test_a_waiter_wakes_when_the_holder_releases(self, nodes: Any, name: str) -> None:
        holder, waiter, witness = _acquirer(nodes()), _acquirer(nodes()), nodes()
        held = await holder.acquire(name, 30)
        assert held is not None
        waiting = _Background(lambda: waiter.acquire(name, 30, wait=30))
        await _pause(0.5)
        assert await witness.try_acquire(name, 30) is False, "the waiter took a held lock"
        released_at = time.monotonic()
        await holder.release_holding(held)
        won: Holding | None = await waiting.outcome(30)
        assert isinstance(won, Holding), "the waiter did not win after the release"
        assert time.monotonic() - released_at < 5, "the waiter woke late"
        assert await witness.try_acquire(name, 30) is False, "the waiter's win is not on the server"
        await waiter.release_holding(won)
        assert await witness.try_acquire(name, 30), "the waiter's release did not free it"
        await witness.release(name)

    async def test_a_wait_that_times_out_returns_none_and_leaves_nothing(
        self, nodes: Any, name: str
    ) -> None:
        holder, waiter, witness = _acquirer(nodes()), _acquirer(nodes()), nodes()
        held = await holder.acquire(name, 30)
        assert held is not None
        started = time.monotonic()
        assert await waiter.acquire(name, 30, wait=0.6) is None
        waited = time.monotonic() - started
        assert 0.6 <= waited < 0.6 + EXPIRY_SLACK_SECONDS, f"waited {waited:.3f} s for 0.6 s"
        await holder.release_holding(held)
        assert await witness.try_acquire(name, 30), "a timed-out wait kept the lock"
        await witness.release(name)

    @pytest.mark.parametrize("wait", [-1, math.nan, "1"])
    async def test_a_bad_wait_is_refused(self, nodes: Any, name: str, wait: Any) -> None:
        with pytest.raises((ValueError, TypeError), match="wait"):
            await _acquirer(nodes()).acquire(name, 30, wait=wait)

    async def test_waiters_of_one_instance_are_served_in_arrival_order(
        self, nodes: Any, name: str
    ) -> None:
        holder, shared = _acquirer(nodes()), _acquirer(nodes())
        held = await holder.acquire(name, 30)
        assert held is not None
        order: list[int] = []

        def waiter(index: int) -> Callable[[], Any]:
            async def run() -> None:
                won = await shared.acquire(name, 30, wait=60)
                assert won is not None
                order.append(index)
                await _pause(0.05)
                await shared.release_holding(won)

            return run

        waiters = []
        for index in range(4):
            waiters.append(_Background(waiter(index)))
            await _pause(0.2)  # each is queued before the next arrives
        await holder.release_holding(held)
        for waiting in waiters:
            await waiting.outcome(60)
        assert order == [0, 1, 2, 3], f"served out of arrival order: {order}"

    async def test_waiters_of_separate_processes_are_served_in_arrival_order(
        self,
        lock_factory: Any,
        nodes: Any,
        name: str,
        capabilities: LockCapabilities,
        tmp_path: Path,
        queued_on_server: Callable[[str], int] | None,
    ) -> None:
        """FIFO across processes: 4 processes queue, one after another (each seen
        queued on the server by a second client before the next starts), and take
        the lock in that order: they log while holding it (O_APPEND), and where the
        backend fences, the server's tokens rise in the same order."""
        if not capabilities.ordered_waiters:
            pytest.skip("the backend declares no order among the waiters of processes")
        if queued_on_server is None:
            pytest.skip("the backend supplies no second client counting queued waiters")
        holder = _acquirer(nodes())
        held = await holder.acquire(name, 60)
        assert held is not None
        log = str(tmp_path / "events")
        Path(log).write_text("")
        context = child_processes()
        asynchronous = ASYNC  # sync: asynchronous = False
        fenced = capabilities.fenced
        children = []
        try:
            for arrived in range(1, 5):
                child = context.Process(
                    target=queued_waiter, args=(lock_factory, name, log, asynchronous, fenced)
                )
                child.start()
                children.append(child)
                deadline = time.monotonic() + 60
                while queued_on_server(name) < arrived:
                    assert time.monotonic() < deadline, f"waiter {arrived} never queued"
                    await _pause(0.02)
            await holder.release_holding(held)
            for child in children:
                child.join(120)
                assert child.exitcode == 0, f"a waiter ended with {child.exitcode}"
        finally:
            for child in children:
                if child.is_alive():
                    child.kill()
        served = read_events(log)
        assert [pid for _, pid, _ in served] == [child.pid for child in children], served
        if fenced:
            tokens = [int(event.removeprefix("won:")) for event, _, _ in served]
            assert tokens == sorted(set(tokens)), f"fencing tokens out of order: {tokens}"
        assert queued_on_server(name) == 0, "the served waiters left their places queued"

    async def test_a_killed_waiters_place_lapses_and_the_next_waiter_wins(
        self,
        lock_factory: Any,
        nodes: Any,
        name: str,
        capabilities: LockCapabilities,
        tmp_path: Path,
        queued_on_server: Callable[[str], int] | None,
    ) -> None:
        """A waiter SIGKILLed while first in the queue never blocks it: the next
        waiter (another instance) wins once the dead place lapsed, and the second
        client finds the queue empty after."""
        if not capabilities.ordered_waiters:
            pytest.skip("the backend declares no order among the waiters of processes")
        if queued_on_server is None:
            pytest.skip("the backend supplies no second client counting queued waiters")
        holder, survivor = _acquirer(nodes()), _acquirer(nodes())
        held = await holder.acquire(name, 60)
        assert held is not None
        log = str(tmp_path / "events")
        Path(log).write_text("")
        asynchronous = ASYNC  # sync: asynchronous = False
        doomed = child_processes().Process(
            target=queued_waiter, args=(lock_factory, name, log, asynchronous, False)
        )
        doomed.start()
        try:
            deadline = time.monotonic() + 60
            while queued_on_server(name) < 1:
                assert time.monotonic() < deadline, "the doomed waiter never queued"
                await _pause(0.02)
            waiting = _Background(lambda: survivor.acquire(name, 60, wait=60))
            deadline = time.monotonic() + 30
            while queued_on_server(name) < 2:
                assert time.monotonic() < deadline, "the surviving waiter never queued"
                await _pause(0.02)
            assert doomed.pid is not None
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.join(30)
            # The dead place is first: only its lapse lets the survivor win.
            await holder.release_holding(held)
            won: Holding | None = await waiting.outcome(90)
            assert won is not None, "the live waiter never won behind a dead place"
            assert read_events(log) == [], "the killed waiter won before it was killed"
            assert queued_on_server(name) == 0, "a place is still queued"
            await survivor.release_holding(won)
        finally:
            if doomed.is_alive():
                doomed.kill()

    async def test_a_notified_waiter_wakes_on_the_release_alone(
        self, nodes: Any, name: str, capabilities: LockCapabilities
    ) -> None:
        """Without its fallback recheck, and with the holder's lease outliving the wait,
        only the server's notification can wake the waiter: it wins with exactly two
        attempts, the one that lost and the one after the release."""
        if not capabilities.notified_wait:
            pytest.skip("the backend declares no notified wait")
        holder, waiter = _acquirer(nodes()), _acquirer(nodes())
        waiter.notified_recheck_seconds = 3600.0
        attempts = AttemptCounter(waiter)
        held = await holder.acquire(name, 120)
        assert held is not None
        waiting = _Background(lambda: waiter.acquire(name, 120, wait=60))
        deadline = time.monotonic() + 30
        while attempts.count < 1:
            assert time.monotonic() < deadline, "the waiter never tried"
            await _pause(0.02)
        await _pause(0.5)  # a poller tries again within 5 ms, and 7 times in 0.5 s
        assert attempts.count == 1, f"{attempts.count} attempts while held: it polled"
        await holder.release_holding(held)
        won: Holding | None = await waiting.outcome(90)
        assert isinstance(won, Holding), "the release did not wake the waiter"
        assert attempts.count == 2, f"{attempts.count} attempts: woken by something else"
        await waiter.release_holding(won)

    @pytest.fixture
    def waiters_on_server(self) -> Callable[[str], int] | None:
        """How many waiters (subscriptions, queued sessions) the server keeps for a name,
        read with a second client (per backend); None where the server cannot say."""
        return None

    @pytest.fixture
    def queued_on_server(
        self, waiters_on_server: Callable[[str], int] | None
    ) -> Callable[[str], int] | None:
        """How many waiters hold a place in the name's queue on the server, one each,
        read with a second client; by default `waiters_on_server`."""
        return waiters_on_server

    # -- cancellation ---------------------------------------------------------------

    if ASYNC:

        async def test_a_cancelled_wait_leaves_nothing_on_the_server(
            self, nodes: Any, name: str, waiters_on_server: Callable[[str], int] | None
        ) -> None:
            holder, waiter, witness = _acquirer(nodes()), _acquirer(nodes()), nodes()
            held = await holder.acquire(name, 30)
            assert held is not None
            task = asyncio.ensure_future(waiter.acquire(name, 30, wait=60))
            await _pause(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 10)
            if waiters_on_server is not None:
                assert waiters_on_server(name) == 0, "the cancelled wait is still on the server"
            await holder.release_holding(held)
            # A waiter left on the server would take the lock the moment it was freed.
            assert await witness.try_acquire(name, 30), "a cancelled waiter took the lock"
            await witness.release(name)
            assert await waiter.try_acquire(name, 30), "the cancelled instance no longer works"
            await waiter.release(name)

    else:

        def test_an_interrupted_wait_leaves_nothing_on_the_server(
            self,
            lock_factory: Any,
            nodes: Any,
            name: str,
            capabilities: LockCapabilities,
            tmp_path: Path,
            waiters_on_server: Callable[[str], int] | None,
        ) -> None:
            """KeyboardInterrupt (SIGINT) in a waiting process's main thread."""
            if not capabilities.cross_process:
                pytest.skip("this backend only excludes threads of one process")
            holder, witness = _acquirer(nodes()), nodes()
            held = holder.acquire(name, 30)
            assert held is not None
            log = str(tmp_path / "events")
            Path(log).write_text("")
            child = child_processes().Process(
                target=interrupted_waiter, args=(lock_factory, name, log)
            )
            child.start()
            try:
                _until(lambda: any(e == "waiting" for e, _, _ in read_events(log)), 60)
                time.sleep(1.0)  # well inside the wait, on the server where it has one
                assert child.pid is not None
                os.kill(child.pid, signal.SIGINT)
                _until(lambda: any(e == "interrupted" for e, _, _ in read_events(log)), 30)
                if waiters_on_server is not None:
                    assert waiters_on_server(name) == 0, "the interrupted wait is on the server"
                holder.release_holding(held)
                # The child is still alive: its sessions stay open, so a waiter left on
                # the server would take the lock now.
                time.sleep(0.2)
                assert witness.try_acquire(name, 30), "an interrupted waiter took the lock"
                witness.release(name)
            finally:
                child.join(30)
                if child.is_alive():
                    child.kill()
            events = [event for event, _, _ in read_events(log)]
            assert events == ["waiting", "interrupted", "exiting"], events


def _until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the child did not report in time"
        time.sleep(0.02)


__all__ = ["AsyncWaitingContract"]
