"""A `pause` the server applied but whose reply was lost: an error, a pause that holds.

The operator's client reaches the server through the fault checker's proxy, which
lets the pause's write through and drops the server's reply to it, then resets the
connection (`FaultyProxy.lose_reply_to`): on Redis the reply to the `HSET`, on
PostgreSQL and MySQL the reply to the write's `COMMIT`. `pause` must raise (it never
saw the server confirm), a second client must find the pause stored, a node reading
the server directly must skip a later fire as paused, and sending the same `pause`
again must return and leave one pause, with one change in the audit trail.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import pytest

from chaos_harness.proxy import FaultyProxy
from firefly_scheduling import ScheduleControl
from firefly_scheduling.control import ControlStore, ControlStoreError
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.pausing import PauseReader
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory
from firefly_scheduling.locks.memory import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database.control_store import DatabaseControlStore
from firefly_scheduling_redis.control_store import RedisControlStore

#: A fire's instant later than any pause of this test.
LATER = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("url_fixture", "store_of", "marker"),
    [
        ("redis_url", RedisControlStore, b"HSET"),
        ("postgres_url", DatabaseControlStore, b"COMMIT"),
        ("mysql_url", DatabaseControlStore, b"COMMIT"),
    ],
)
def test_a_pause_whose_reply_is_lost_raises_holds_and_can_be_sent_again(
    url_fixture: str,
    store_of: Callable[[str], ControlStore],
    marker: bytes,
    request: pytest.FixtureRequest,
) -> None:
    url: str = request.getfixturevalue(url_fixture)
    parts = urlsplit(url)
    proxy = FaultyProxy(parts.hostname or "127.0.0.1", parts.port or 0).start()
    credentials, _, _ = parts.netloc.rpartition("@")
    netloc = f"{credentials}@127.0.0.1:{proxy.port}" if credentials else f"127.0.0.1:{proxy.port}"
    operator = ScheduleControl(store=store_of(parts._replace(netloc=netloc).geturl()))
    reader = store_of(url)  # a second client, direct
    target = f"tests.pause_lost_reply_{uuid.uuid4().hex}:job"
    task = ScheduledDescriptor(target=target, lock_name=target, lock_ttl=30.0, fixed_rate=1.0)
    runner = FireRunner(
        InMemoryLock(), history=MemoryRunHistory(), clock=lambda: LATER, pauses=PauseReader(reader)
    )
    ran: list[Any] = []
    try:
        operator.status()  # connected (and the table made) before the fault
        proxy.lose_reply_to(marker)
        with pytest.raises(ControlStoreError):
            operator.pause(target, note="lost reply drill", by="ops@test")
        assert proxy.replies_lost == 1, "the fault did not meet the pause's write"
        stored = reader.pause_of(target)
        assert stored is not None, "the server did not apply the pause whose reply was lost"
        assert (stored.by, stored.note) == ("ops@test", "lost reply drill")
        result = runner.run(Fire.at(task, LATER), lambda: ran.append(True))
        assert result.verdict is Verdict.PAUSED
        assert ran == []
        again = operator.pause(target, note="lost reply drill", by="ops@test")
        assert [pause.task for pause in reader.pauses() if pause.task == target] == [target]
        assert reader.pause_of(target) == again
        assert [change.what for change in reader.changes(target)] == ["pause"]
    finally:
        reader.resume(target, by="ops@test")
        runner.close()
        for store in (reader, operator.store):
            store.close()
        proxy.close()
