"""The pause check costs one read of the control store per batch, not per fire.

The resident host claims the fires of one instant together and, on a backend that
batches acquisitions (Redis here, on its real server), takes their task locks with
the claims; the start stage then reads the pauses once for all of them, and their
workers read no more. A fire run on its own reads once. The reads are counted by the
control store itself (process memory, so nothing else reads it).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import cast

from firefly_scheduling.control.memory import MemoryControlStore
from firefly_scheduling.control.records import RecordKind
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.pausing import PauseReader
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory, RunHistory, RunState
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_redis import RedisLock

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class CountingStore(MemoryControlStore):
    """The memory store, counting its listings of pauses (the read of the fire path)."""

    reads = 0

    def _values(self, kind: RecordKind) -> list[str]:
        if kind == "pause":
            self.reads += 1
        return super()._values(kind)


def _task() -> ScheduledDescriptor:
    target = f"tests.pause_batch_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(target=target, lock_name=target, lock_ttl=30.0, fixed_rate=1.0)


def test_a_batch_claimed_together_reads_the_pauses_once(redis_url: str) -> None:
    url = f"memory://pause-batch-{uuid.uuid4().hex}"
    paused = _task()
    MemoryControlStore(url).pause(paused.target, by="ops@test")
    store = CountingStore(url)
    lock = RedisLock(redis_url)
    runner = FireRunner(
        lock, history=MemoryRunHistory(), clock=lambda: T0, pauses=PauseReader(store)
    )
    try:
        fires = [Fire.at(_task(), T0) for _ in range(20)]
        claims = runner.claim_fires(fires)
        verdicts = {
            runner.run(fire, lambda: None, claim=claim).verdict
            for fire, claim in zip(fires, claims, strict=True)
        }
        assert (verdicts, store.reads) == ({Verdict.SUCCEEDED}, 1)
        alone = runner.run(Fire.at(_task(), T0), lambda: None)
        assert (alone.verdict, store.reads) == (Verdict.SUCCEEDED, 2)
        skipped = runner.run(Fire.at(paused, T0), lambda: None)
        assert (skipped.verdict, store.reads) == (Verdict.PAUSED, 3)
    finally:
        runner.close()
        lock.close()


class UnbatchedHistory:
    """A memory history that starts runs one at a time (no `start_new_many`), as a
    history wrapped by a host's own layer is: the batch reads the pauses, and each
    fire's worker writes its start."""

    def __init__(self, inner: MemoryRunHistory) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        if name == "start_new_many":
            raise AttributeError(name)
        return getattr(self._inner, name)


def _unbatched_runner(redis_url: str, history: MemoryRunHistory) -> FireRunner:
    store = MemoryControlStore(f"memory://pause-batch-{uuid.uuid4().hex}")
    unbatched = cast(RunHistory, UnbatchedHistory(history))
    return FireRunner(
        RedisLock(redis_url), history=unbatched, clock=lambda: T0, pauses=PauseReader(store)
    )


def test_a_fire_whose_batch_read_the_pauses_starts_its_run_before_its_body(
    redis_url: str,
) -> None:
    history = MemoryRunHistory()
    runner = _unbatched_runner(redis_url, history)
    descriptor = _task()
    seen: list[tuple[RunState, int]] = []

    def body() -> None:
        [record] = history.runs(descriptor.target, 10)
        seen.append((record.state, record.attempt))

    try:
        fire = Fire.at(descriptor, T0)
        [claim] = runner.claim_fires([fire])
        assert runner.run(fire, body, claim=claim).verdict is Verdict.SUCCEEDED
    finally:
        runner.close()
    assert seen == [(RunState.RUNNING, 1)], "the body ran with no running record"


def test_a_fire_whose_batch_read_the_pauses_is_not_run_again_once_recorded(
    redis_url: str,
) -> None:
    history = MemoryRunHistory()
    descriptor = _task()
    assert descriptor.lock_name is not None
    history.record_run(
        descriptor.target,
        T0,
        lock=descriptor.lock_name,
        node="earlier",
        token=None,
        state=RunState.SUCCEEDED,
        error=None,
        started_at=T0,
        ended_at=T0,
    )
    runner = _unbatched_runner(redis_url, history)
    ran: list[datetime] = []
    try:
        fire = Fire.at(descriptor, T0)
        [claim] = runner.claim_fires([fire])
        result = runner.run(fire, lambda: ran.append(T0), claim=claim)
    finally:
        runner.close()
    assert (result.verdict, ran) == (Verdict.ALREADY_RECORDED, [])
