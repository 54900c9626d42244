"""The keep-alive and leadership contract, written once for both flavours.

A lock held past its TTL: the keep-alive keeps the lease across several TTLs and says
when the server ended it behind the holder's back, and among processes campaigning
for one name exactly one leads, another within the TTL after the leader dies (and,
on lease backends, after it stops). Mixed into `AsyncLockContract` (`contract_async`),
so every backend runs it with the fixtures it already supplies (`nodes`, `name`,
`capabilities`, `lock_factory`, and `lease_dropper` where a second client can end a
holding). Each claim is checked from outside the instance under test: a second
instance, child processes and the signals sent to them, and the kernel's monotonic
clock.

Long versions (more processes) run with `FIREFLY_TEST_LONG=1`.

Written once, for asyncio; `testing/leadership_contract.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncLeadershipContract LeadershipContract
# async-to-sync: rename AsyncHold Hold

from __future__ import annotations

import asyncio  # sync: drop
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.locks.hold_async import AsyncHold, ahold
from firefly_scheduling.locks.port import LockCapabilities
from firefly_scheduling.testing.leader_workers import campaign, read_events
from firefly_scheduling.testing.nodes_async import EXPIRY_SLACK_SECONDS
from firefly_scheduling.testing.workers import child_processes

#: Leadership TTL: etcd's shortest lease is 2 s.
LEADER_TTL_SECONDS = 2.0
LONG = os.environ.get("FIREFLY_TEST_LONG", "") not in {"", "0"}


class AsyncLeadershipContract:
    """Keep-alive, a dropped lease reported, and one leader among processes."""

    # -- keep-alive and loss --------------------------------------------------------

    async def test_keep_alive_holds_across_five_ttls(
        self, nodes: Any, name: str, capabilities: LockCapabilities
    ) -> None:
        """A lease whose renewal is unanswered when it passes is lost by the holder's
        clock, so a renewal must come back within two thirds of the TTL: 1.2 s leaves
        0.8 s for a loaded machine to schedule the renewer."""
        ttl = 1.2
        lock, witness = nodes(), nodes()
        async with ahold(lock, name, ttl, keep_alive=True) as held:
            assert held
            deadline = time.monotonic() + 5 * ttl
            while time.monotonic() < deadline:
                assert await witness.try_acquire(name, 30) is False, "the kept lease lapsed"
                await asyncio.sleep(ttl / 2)
            assert not held.lost
            assert held.token is not None or not capabilities.fenced
        assert await witness.try_acquire(name, 30), "the hold was not released on exit"
        await witness.release(name)

    async def test_keep_alive_reports_a_lease_or_session_the_server_dropped(
        self, nodes: Any, name: str, lease_dropper: Callable[[str], None]
    ) -> None:
        """The server ends the holding behind the holder's back (a second client deletes
        the lease or ends the session); the keep-alive must say so within a TTL."""
        ttl = 0.9
        lock = nodes()
        async with ahold(lock, name, ttl, keep_alive=True) as held:
            assert held
            assert not _lost(held)
            lease_dropper(name)
            deadline = time.monotonic() + ttl + EXPIRY_SLACK_SECONDS
            # The keep-alive's report is the event; the holding may be marked lost a
            # step earlier, by a statement the driver runs in a task of its own.
            while not held.lost_event.is_set():
                assert time.monotonic() < deadline, "the dropped lock was not reported lost"
                await asyncio.sleep(0.05)
            assert _lost(held)

    @pytest.fixture
    def lease_dropper(self) -> Callable[[str], None]:
        """Ends the server's record of a held name with a second client (per backend)."""
        pytest.skip("the backend supplies no lease_dropper")

    # -- leadership -----------------------------------------------------------------

    async def test_one_leader_among_processes_and_a_new_one_after_the_leader_dies(
        self, lock_factory: Any, name: str, capabilities: LockCapabilities, tmp_path: Path
    ) -> None:
        """8 processes campaign; exactly one leads. SIGKILL the leader: another leads
        within the TTL. Lease backends: SIGSTOP the leader, another leads within the
        TTL, and the stopped one, resumed, reports its leadership lost."""
        if not capabilities.cross_process:
            pytest.skip("this backend only excludes threads of one process")
        ttl, processes = LEADER_TTL_SECONDS, 16 if LONG else 8
        log = str(tmp_path / "events")
        Path(log).write_text("")
        context = child_processes()
        asynchronous = ASYNC  # sync: asynchronous = False
        children = [
            context.Process(target=campaign, args=(lock_factory, name, ttl, log, asynchronous))
            for _ in range(processes)
        ]
        for child in children:
            child.start()
        try:
            leader = await _next_leader(log, after=0.0, timeout=90)
            await asyncio.sleep(3 * ttl)
            events = read_events(log)
            assert [e for e in events if e[0] == "won"] == [leader[:3]], f"two leaders: {events}"
            os.kill(leader[1], signal.SIGKILL)
            killed_at = time.monotonic()
            successor = await _next_leader(log, after=killed_at, timeout=ttl + 30)
            took = successor[2] - killed_at
            assert took <= ttl + EXPIRY_SLACK_SECONDS, f"a new leader after {took:.2f} s"
            if capabilities.ttl_honoured:
                os.kill(successor[1], signal.SIGSTOP)
                stopped_at = time.monotonic()
                third = await _next_leader(log, after=stopped_at, timeout=ttl + 30)
                took = third[2] - stopped_at
                assert took <= ttl + EXPIRY_SLACK_SECONDS, f"a new leader after {took:.2f} s"
                os.kill(successor[1], signal.SIGCONT)
                deadline = time.monotonic() + ttl + 10
                while not any(e[:2] == ("lost", successor[1]) for e in read_events(log)):
                    assert time.monotonic() < deadline, "a resumed stale leader never saw it lost"
                    await asyncio.sleep(0.1)
        finally:
            for child in children:
                if child.pid is not None and child.is_alive():
                    os.kill(child.pid, signal.SIGCONT)
                    child.kill()
            for child in children:
                child.join(30)


async def _next_leader(log: str, *, after: float, timeout: float) -> tuple[str, int, float]:
    """The first `won` logged after the monotonic instant `after`."""
    deadline = time.monotonic() + timeout
    while True:
        for event in read_events(log):
            if event[0] == "won" and event[2] > after:
                return event
        assert time.monotonic() < deadline, f"no leader within {timeout:.0f} s"
        await asyncio.sleep(0.02)


def _lost(held: AsyncHold) -> bool:
    return held.lost


__all__ = ["AsyncHold", "AsyncLeadershipContract"]
