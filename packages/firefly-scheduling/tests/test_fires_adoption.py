"""FireRunner adopts a fire whose node died mid-body, within grace, as a new attempt.

On InMemoryLock + the memory history, with movable clocks instead of sleeps.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.history import HistoryError, MemoryRunHistory, RunState

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
from firefly_fire_runner_scene import SECOND, T0, Clock, DeadNode, Recorder, runner, task


class TestAdoption:
    def test_a_died_run_is_adopted_within_grace_as_attempt_two(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        dead = DeadNode(descriptor, history)
        body = Recorder()
        survivor = runner(Clock(T0 + 31 * SECOND), history, "survivor")
        outcome = survivor.run(Fire.at(descriptor, T0 + 31 * SECOND), body)
        assert outcome.verdict is Verdict.SUCCEEDED
        [adopted] = outcome.adopted
        assert (adopted.verdict, adopted.instant, adopted.attempt) == (
            Verdict.SUCCEEDED,
            T0,
            2,
        )
        assert adopted.token is not None
        assert adopted.token > dead.token
        assert [(c.instant, c.attempt) for c in body.seen] == [(T0, 2), (T0 + 31 * SECOND, 1)]
        record = history.runs(descriptor.target)[-1]
        assert (record.instant, record.state, record.node, record.attempt) == (
            T0,
            RunState.SUCCEEDED,
            "survivor",
            2,
        )

    def test_an_adopted_run_and_the_fire_that_adopted_it_share_one_holding_and_token(
        self,
    ) -> None:
        """The documented order: a token orders holdings; runs under one holding
        (the adoption, then the fire) share it and run one after the other, so a
        resource stamped with tokens must refuse only an OLDER token, not an equal one."""
        history = MemoryRunHistory()
        descriptor = task()
        dead = DeadNode(descriptor, history)
        ran: list[tuple[int, float, float]] = []

        def body() -> None:
            context = current_fire()
            assert context is not None
            assert context.token is not None
            started = time.monotonic()
            time.sleep(0.01)
            ran.append((context.token, started, time.monotonic()))

        survivor = runner(Clock(T0 + 31 * SECOND), history, "survivor")
        outcome = survivor.run(Fire.at(descriptor, T0 + 31 * SECOND), body)
        [adopted] = outcome.adopted
        assert adopted.token == outcome.token
        [(adopted_token, _, adopted_end), (fire_token, fire_start, _)] = ran
        assert adopted_token == fire_token > dead.token
        assert adopted_end <= fire_start  # never concurrent: one after the other
        later = survivor.run(Fire.at(descriptor, T0 + 32 * SECOND), body)
        assert later.token is not None
        assert later.token > fire_token  # the next holding orders after both

    def test_an_adoption_whose_start_cannot_be_recorded_is_not_run(self) -> None:
        """Found by benchmarks/chaos.py: an adoption run unrecorded was adopted again by
        the next lock holder, and its body ran twice. The fire's own run still goes on."""

        class StartFails(MemoryRunHistory):
            def start(self, *args: object, **kwargs: object) -> int | None:
                raise HistoryError("history write failed (injected)")

        history = StartFails()
        descriptor = task()
        assert (
            MemoryRunHistory.start(
                history,
                descriptor.target,
                T0,
                lock=descriptor.lock_name or descriptor.target,
                node="dead",
                token=1,
                at=T0,
            )
            == 1
        )
        body = Recorder()
        survivor = runner(Clock(T0 + 31 * SECOND), history, "survivor")
        outcome = survivor.run(Fire.at(descriptor, T0 + 31 * SECOND), body)
        [adopted] = outcome.adopted
        assert (adopted.verdict, adopted.instant, adopted.adoption) == (
            Verdict.BACKEND_ERROR,
            T0,
            True,
        )
        assert adopted.error is not None
        assert "injected" in adopted.error
        assert [(c.instant, c.attempt) for c in body.seen] == [(T0 + 31 * SECOND, 1)]
        [died] = history.unfinished(descriptor.target, lock=descriptor.lock_name or "")
        assert (died.instant, died.attempt, died.node) == (T0, 1, "dead")

    def test_a_died_run_found_after_grace_is_expired_not_adopted(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        DeadNode(descriptor, history)
        body = Recorder()
        now = T0 + 90 * SECOND
        outcome = runner(Clock(now), history, "survivor", grace=60).run(
            Fire.at(descriptor, now), body
        )
        assert outcome.verdict is Verdict.SUCCEEDED
        assert [(o.verdict, o.instant) for o in outcome.adopted] == [(Verdict.EXPIRED, T0)]
        assert [c.instant for c in body.seen] == [now]
        old = history.runs(descriptor.target)[-1]
        assert (old.instant, old.state) == (T0, RunState.EXPIRED)

    def test_a_zombie_waking_after_adoption_is_fenced(self) -> None:
        """SIGSTOP: the holder stops renewing, its lease lapses, another node adopts."""
        history = MemoryRunHistory()
        descriptor = task(lock_ttl=0.2)
        resume = threading.Event()
        zombie_body = Recorder(lambda: resume.wait(10))
        # Renewals 100 s apart: the stopped process renews nothing while stopped.
        zombie = runner(Clock(), history, "zombie", keepalive_interval=100)
        outcomes = []
        thread = threading.Thread(
            target=lambda: outcomes.append(zombie.run(Fire.at(descriptor, T0), zombie_body))
        )
        thread.start()
        deadline = time.monotonic() + 5
        while not zombie_body.seen and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # past the zombie's 0.2 s lease
        adopter_body = Recorder()
        adopter = runner(Clock(T0 + SECOND), history, "adopter")
        outcome = adopter.run(Fire.at(descriptor, T0 + SECOND), adopter_body)
        assert [(o.instant, o.attempt, o.verdict) for o in outcome.adopted] == [
            (T0, 2, Verdict.SUCCEEDED)
        ]
        resume.set()
        thread.join(timeout=10)
        [late] = outcomes
        assert (late.verdict, late.fenced) == (Verdict.SUCCEEDED, True)
        assert late.token is not None
        assert outcome.adopted[0].token is not None
        assert late.token < outcome.adopted[0].token
        record = history.runs(descriptor.target)[-1]
        assert (record.instant, record.state, record.node, record.attempt) == (
            T0,
            RunState.SUCCEEDED,
            "adopter",
            2,
        )
