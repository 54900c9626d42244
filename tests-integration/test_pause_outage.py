"""A lock-server outage while `pause` is sent: an error, or a pause that holds.

The operator's client reaches Redis through the fault checker's proxy, which drops
everything for a while (a blackhole) and then resets the connections that lost data,
as a network outage does. `pause` sent meanwhile either raises (`ControlStoreError`)
or returns; a node reading the store directly then runs a fire of the task. Whatever
happened, "`pause` returned, and the fire still ran" never does: the node's answer is
checked against a second client's read of the server.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime
from urllib.parse import urlsplit

from chaos_harness.proxy import FaultyProxy
from firefly_scheduling import ScheduleControl
from firefly_scheduling.control import ControlStoreError
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.pausing import PauseReader
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_redis import RedisLock
from firefly_scheduling_redis.control_store import RedisControlStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)
BLACKHOLE_SECONDS = 1.5


def test_a_pause_sent_into_an_outage_raises_or_holds(redis_url: str) -> None:
    parts = urlsplit(redis_url)
    proxy = FaultyProxy(parts.hostname or "127.0.0.1", parts.port or 6379).start()
    proxied = parts._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
    prefix = f"test-pause-outage-{uuid.uuid4().hex}"
    target = f"tests.pause_outage_{uuid.uuid4().hex}:job"
    task = ScheduledDescriptor(target=target, lock_name=target, lock_ttl=30.0, fixed_rate=1.0)
    operator = ScheduleControl(store=RedisControlStore(proxied, prefix=prefix))
    reader = RedisControlStore(redis_url, prefix=prefix)  # a second client, direct
    node_store = RedisControlStore(redis_url, prefix=prefix)
    lock = RedisLock(redis_url)
    runner = FireRunner(
        lock, history=MemoryRunHistory(), clock=lambda: T0, pauses=PauseReader(node_store)
    )
    try:
        operator.status()  # connected before the outage
        proxy.blackhole(BLACKHOLE_SECONDS)
        outcome: list[object] = []
        sender = threading.Thread(target=lambda: outcome.append(_pause(operator, target)))
        sender.start()
        sender.join(60)
        assert outcome, "pause neither returned nor raised"
        time.sleep(BLACKHOLE_SECONDS)  # the outage is over for the node
        ran = runner.run(Fire.at(task, T0), lambda: None)
        stored = reader.pause_of(target)
        if outcome[0] == "returned":
            assert stored is not None
            assert ran.verdict is Verdict.PAUSED
        else:
            assert isinstance(outcome[0], ControlStoreError)
            # the write may have landed before the reply was lost: then it holds
            assert ran.verdict is (Verdict.PAUSED if stored is not None else Verdict.SUCCEEDED)
    finally:
        reader.resume(target)
        runner.close()
        lock.close()
        for store in (reader, node_store, operator.store):
            store.close()
        proxy.close()


def _pause(control: ScheduleControl, target: str) -> object:
    try:
        control.pause(target, note="outage drill", by="ops@test")
    except ControlStoreError as err:
        return err
    return "returned"
