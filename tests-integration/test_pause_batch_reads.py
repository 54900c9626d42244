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

from firefly_scheduling.control.memory import MemoryControlStore
from firefly_scheduling.control.records import RecordKind
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.pausing import PauseReader
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory
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
