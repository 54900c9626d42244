"""`current_fire()` across threads, and `KeepAlive` on its own."""

from __future__ import annotations

import contextvars
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from firefly_scheduling import FireContext, current_fire
from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.locks import BaseLock, InMemoryLock, capabilities_of
from firefly_scheduling.locks.keepalive import KeepAlive, Renewer
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def locked(name: str) -> ScheduledDescriptor:
    return ScheduledDescriptor(target=name, fixed_rate=1.0, lock_name=name, lock_ttl=30.0)


class TestCurrentFire:
    def test_none_outside_a_fire(self) -> None:
        assert current_fire() is None

    def test_fires_running_at_once_in_executor_threads_each_see_their_own(self) -> None:
        both_inside = threading.Barrier(2, timeout=10)
        seen: dict[str, FireContext | None] = {}
        runner = FireRunner(InMemoryLock(), clock=lambda: T0, node="pool")

        def fire(name: str) -> None:
            def body() -> None:
                both_inside.wait()  # the two bodies overlap in time
                seen[name] = current_fire()

            runner.run(Fire.at(locked(name), T0), body)

        names = [f"tests.ctx_{uuid.uuid4().hex}:job{i}" for i in range(2)]
        with ThreadPoolExecutor(max_workers=2) as pool:
            for future in [pool.submit(fire, name) for name in names]:
                future.result(timeout=10)
        for name in names:
            context = seen[name]
            assert context is not None
            assert context.target == name
        assert current_fire() is None

    def test_a_thread_the_body_starts_sees_it_when_handed_the_context(self) -> None:
        seen: list[FireContext | None] = []

        def body() -> None:
            plain = threading.Thread(target=lambda: seen.append(current_fire()))
            plain.start()
            plain.join()
            context = contextvars.copy_context()
            handed = threading.Thread(target=lambda: seen.append(context.run(current_fire)))
            handed.start()
            handed.join()

        name = f"tests.ctx_{uuid.uuid4().hex}:job"
        FireRunner(InMemoryLock(), clock=lambda: T0).run(Fire.at(locked(name), T0), body)
        plain_view, handed_view = seen
        assert plain_view is None  # Python starts threads with an empty context
        assert handed_view is not None
        assert handed_view.target == name


class TestKeepAlive:
    def test_it_keeps_a_short_lease_held_while_running(self) -> None:
        name = f"keepalive-{uuid.uuid4()}"
        lock = InMemoryLock()
        holding = lock.acquire(name, 0.2)
        assert holding is not None
        with KeepAlive(lock, holding, 0.2) as keepalive:
            time.sleep(0.6)
            assert not InMemoryLock().try_acquire(name, 1)
        assert not keepalive.lost.is_set()
        lock.release_holding(holding)

    def test_without_it_the_lease_lapses(self) -> None:
        """The control case: the test above would pass for nothing if leases never lapsed."""
        name = f"keepalive-{uuid.uuid4()}"
        assert InMemoryLock().try_acquire(name, 0.2)
        time.sleep(0.3)
        assert InMemoryLock().try_acquire(name, 1)

    def test_a_renewal_of_a_lease_taken_over_marks_it_lost(self) -> None:
        name = f"keepalive-{uuid.uuid4()}"
        lock = InMemoryLock()
        holding = lock.acquire(name, 0.1)
        assert holding is not None
        keepalive = KeepAlive(lock, holding, 0.1, interval=0.3).start()
        time.sleep(0.15)
        assert InMemoryLock().try_acquire(name, 30)  # lapsed and taken by another node
        assert keepalive.lost.wait(5)
        keepalive.stop()
        assert holding.lost

    def test_a_lapsed_holdings_keep_alive_never_renews_a_newer_holding_of_its_name(self) -> None:
        """the keep-alive acted on the name, so it renewed the newer holding."""
        name = f"keepalive-{uuid.uuid4()}"
        lock = InMemoryLock()
        first = lock.acquire(name, 0.1)
        assert first is not None
        keepalive = KeepAlive(lock, first, 0.1, interval=0.3).start()
        time.sleep(0.15)
        second = lock.acquire(name, 0.5)  # the same instance takes the lapsed name again
        assert second is not None
        assert keepalive.lost.wait(5), "the lapsed holding must learn that it is lost"
        keepalive.stop()
        assert not second.lost
        time.sleep(0.6)  # the newer holding was never extended by the older keep-alive
        assert InMemoryLock().try_acquire(name, 1)

    def test_one_thread_renews_every_keep_alive(self) -> None:
        lock = InMemoryLock()
        renewer = Renewer()
        keepalives = []
        # Leases of 2 s, renewed every 0.67 s, watched past a whole TTL: only renewals
        # keep them, and a loaded machine delaying one renewal by a second loses none.
        for _ in range(20):
            holding = lock.acquire(f"keepalive-{uuid.uuid4()}", 2.0)
            assert holding is not None
            keepalives.append(KeepAlive(lock, holding, 2.0).start(renewer))
        before = threading.active_count()
        time.sleep(2.3)
        assert renewer.watched() == 20
        assert threading.active_count() == before
        for keepalive in keepalives:
            keepalive.stop()
            assert not keepalive.lost.is_set()
            assert not InMemoryLock().try_acquire(keepalive.holding.name, 1)
            lock.release_holding(keepalive.holding)
        assert renewer.watched() == 0

    def test_a_shorter_keep_alive_started_while_the_thread_sleeps_is_renewed_in_time(
        self,
    ) -> None:
        """The thread is woken only for a renewal due before the one it sleeps for;
        this is that case: a 0.3 s lease started after a 60 s one must not lapse."""
        lock = InMemoryLock()
        renewer = Renewer()
        slow = lock.acquire(f"keepalive-{uuid.uuid4()}", 60)
        assert slow is not None
        sleeping = KeepAlive(lock, slow, 60).start(renewer)
        time.sleep(0.2)  # the thread now sleeps until the 60 s lease's renewal
        fast = lock.acquire(f"keepalive-{uuid.uuid4()}", 0.3)
        assert fast is not None
        hurried = KeepAlive(lock, fast, 0.3).start(renewer)
        time.sleep(1.0)
        assert not hurried.lost.is_set()
        assert not InMemoryLock().try_acquire(fast.name, 1), "the 0.3 s lease was renewed"
        for keepalive in (hurried, sleeping):
            keepalive.stop()
            lock.release_holding(keepalive.holding)

    def test_the_interval_must_be_positive(self) -> None:
        holding = InMemoryLock().acquire(f"keepalive-{uuid.uuid4()}", 1)
        assert holding is not None
        with pytest.raises(ValueError):
            KeepAlive(InMemoryLock(), holding, 1, interval=0)

    def test_a_backend_without_renewal_gets_no_keep_alive(self) -> None:
        class NoRenew(BaseLock):
            def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
                return True

            def _release(self, name: str, owner: str) -> bool:
                return True

        assert capabilities_of(InMemoryLock()).renewable
        assert not capabilities_of(NoRenew()).renewable
        ran: list[str] = []

        def body() -> None:
            time.sleep(0.05)  # many keep-alive intervals: none may run and fail
            ran.append("ran")

        descriptor = locked(f"tests.ctx_{uuid.uuid4().hex}:job")
        runner = FireRunner(NoRenew(), clock=lambda: T0, keepalive_interval=0.01)
        outcome = runner.run(Fire.at(descriptor, T0), body)
        assert ran == ["ran"]
        assert not outcome.lost
