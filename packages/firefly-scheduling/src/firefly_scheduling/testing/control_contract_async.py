"""The control store contract: what every adapter must do, on its real server.

A backend runs it by subclassing `AsyncControlStoreContract` (or the generated
`ControlStoreContract`) and supplying two fixtures:

* `control_store_factory`: a picklable zero-argument callable returning a new,
  independent store instance (as if on another node), all on one namespace (key
  prefix or table) that no other test uses;
* `neighbour_store_factory`: the same on another namespace of the same server, to
  prove nothing leaks between two deployments sharing it;

and, optionally, `unreachable_control_store` (a store on a closed port, and the
password in its URL or None) for the failure case. Written once, for asyncio;
`control_contract.py` is generated from it by `tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncControlStoreContract ControlStoreContract
# async-to-sync: rename AsyncControlStores ControlStores
# async-to-sync: rename AsyncControlStore ControlStore
# async-to-sync: rename AsyncControlConcurrencyContract ControlConcurrencyContract

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from firefly_scheduling.control.records import ALL_TASKS, ControlStoreError, ScheduleConflict
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.testing.control_nodes_async import AsyncControlStores
from firefly_scheduling.testing.control_races_async import AsyncControlConcurrencyContract


class AsyncControlStoreContract(AsyncControlConcurrencyContract):
    """Every operation of the control store, across independent instances of one server."""

    # -- pause ----------------------------------------------------------------------

    async def test_pause_and_resume_round_trip_with_who_why_and_when(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        operator, node = stores(), stores()
        assert await node.pause_of(task) is None
        before = await operator.now()
        paused = await operator.pause(task, by="alice", note="database migration")
        after = await operator.now()
        seen = await node.pause_of(task)
        assert seen == paused
        assert (seen.task, seen.by, seen.note) == (task, "alice", "database migration")
        assert before <= seen.since <= after, "since is not the store's clock at the pause"
        assert await node.resume(task) is True
        assert await operator.pause_of(task) is None
        assert await operator.resume(task) is False, "a second resume found a pause"

    async def test_a_resume_keeps_the_stretch_it_lifted_and_lists_it_apart(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        # Resume is from now: a node must still tell a fire due while paused, read late.
        operator, node = stores(), stores()
        paused = await operator.pause(task, by="alice", note="incident")
        assert await operator.resume(task) is True
        resumed = await operator.now()
        state = await node.pause_state()
        assert state.in_force == []
        assert await node.pauses() == []
        [stretch] = state.lifted
        assert (stretch.task, stretch.by, stretch.since) == (task, "alice", paused.since)
        assert stretch.until is not None
        assert paused.since <= stretch.until <= resumed
        assert stretch.holds(paused.since)
        assert not stretch.holds(stretch.until)
        await operator.pause(task, by="bob")
        again = await node.pause_state()
        assert [p.by for p in again.in_force] == ["bob"], "a new pause is not in force"
        assert again.lifted == [stretch], "pausing again changed the last lifted stretch"
        await operator.resume(task)
        [latest] = (await node.pause_state()).lifted
        assert latest.by == "bob", "a second resume did not replace the lifted stretch"

    async def test_every_change_is_in_the_audit_trail_with_who_when_and_what(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        operator, reader = stores(), stores()
        window = (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC))
        schedule = f"audit-{uuid.uuid4().hex}"
        before = await operator.now()
        await operator.pause(task, by="alice", note="incident")
        await operator.resume(task, by="bob")
        await operator.resume(task, by="bob")  # nothing to lift: still a change asked
        asked = await operator.request_trigger(task, by="carol")
        await operator.request_backfill(task, *window, by="dan")
        await operator.add_schedule(
            schedule, ScheduledDescriptor(target=task, fixed_rate=60.0, lock_name=task), by="erin"
        )
        await operator.remove_schedule(schedule, by="frank")
        after = await operator.now()
        trail = await reader.changes(task)
        assert [(c.what, c.by, c.detail) for c in reversed(trail)] == [
            ("pause", "alice", "incident"),
            ("resume", "bob", "lifted"),
            ("resume", "bob", "was not paused"),
            ("trigger", "carol", asked.id),
            ("backfill", "dan", f"[{window[0].isoformat()}, {window[1].isoformat()})"),
        ]
        assert all(before <= c.at <= after for c in trail), "a change is not on the store's clock"
        on_schedule = await reader.changes(schedule)
        assert [(c.what, c.by) for c in on_schedule] == [
            ("schedule remove", "frank"),
            ("schedule add", "erin"),
        ]
        assert (await reader.changes(task, limit=1))[0].what == "backfill"

    async def test_the_audit_trail_keeps_the_newest_changes_pruned_on_write(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        operator, reader = stores(), stores()
        operator.changes_kept = 3
        for n in range(5):
            await operator.pause(task, by="alice", note=f"pause {n}")
        kept = await reader.changes()
        assert [c.detail for c in kept] == ["pause 4", "pause 3", "pause 2"], (
            "the trail is not the newest changes_kept"
        )
        await reader.resume(task, by="bob")  # a store keeping more prunes nothing
        assert [c.detail for c in await reader.changes()][:2] == ["lifted", "pause 4"]
        assert len(await reader.changes()) == 4

    async def test_a_pause_written_by_one_client_is_read_by_another_at_once(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        operator, node = stores(), stores()
        for _ in range(3):
            assert await node.pause_of(task) is None
            await operator.pause(task, by="alice")
            assert await node.pause_of(task) is not None, "a reader kept a stale answer"
            await operator.resume(task)
        assert await node.pause_of(task) is None

    async def test_pausing_again_replaces_who_and_why(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        first, second = stores(), stores()
        await first.pause(task, by="alice", note="one")
        await second.pause(task, by="bob", note="two")
        seen = await first.pause_of(task)
        assert seen is not None
        assert (seen.by, seen.note) == ("bob", "two")
        assert [pause.task for pause in await first.pauses()] == [task]

    async def test_pause_all_holds_every_task_and_leaves_task_pauses(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        operator, node = stores(), stores()
        other = task.replace(":job", ":other")
        await operator.pause(task, by="alice", note="own")
        fleet = await operator.pause_all(by="bob", note="incident")
        assert fleet.task == ALL_TASKS
        assert fleet.all_tasks
        assert await node.pause_of(other) == fleet
        assert await node.pause_of(task) == fleet, "the fleet-wide pause is reported first"
        assert [pause.task for pause in await node.pauses()] == [ALL_TASKS, task]
        assert await node.resume_all() is True
        own = await node.pause_of(task)
        assert own is not None, "resume_all lifted a task's own pause"
        assert own.note == "own"
        assert await node.pause_of(other) is None

    async def test_status_lists_every_pause_by_task(self, stores: AsyncControlStores) -> None:
        operator, reader = stores(), stores()
        tasks = [f"app.status_{uuid.uuid4().hex}:job{index}" for index in range(3)]
        for index, name in enumerate(reversed(tasks)):
            await operator.pause(name, by=f"op{index}", note="")
        listed = await reader.pauses()
        assert [pause.task for pause in listed] == sorted(tasks)
        assert {pause.by for pause in listed} == {"op0", "op1", "op2"}

    # -- triggers -------------------------------------------------------------------------

    async def test_a_trigger_removed_once_handled_is_gone_for_every_client(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        operator, node, other = stores(), stores(), stores()
        first = await operator.request_trigger(task, by="alice")
        second = await operator.request_trigger(task, by="bob")
        assert await node.remove_trigger(first) is True
        assert await other.remove_trigger(first) is False, "a trigger removed twice"
        assert await other.triggers(task) == [second]

    async def test_triggers_are_taken_oldest_first_and_only_for_their_task(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        operator, node = stores(), stores()
        other = task.replace(":job", ":other")
        first = await operator.request_trigger(task, by="alice")
        second = await operator.request_trigger(task, by="bob")
        elsewhere = await operator.request_trigger(other, by="carol")
        assert [t.id for t in await node.triggers(task)] == [first.id, second.id]
        assert await node.take_trigger(task) == first
        assert await node.take_trigger(task) == second
        assert await node.take_trigger(task) is None
        assert await node.triggers() == [elsewhere]

    # -- backfills -----------------------------------------------------------------------

    async def test_a_backfill_asked_twice_is_one_request(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        first, second = stores(), stores()
        start = datetime(2026, 3, 1, tzinfo=UTC)
        end = datetime(2026, 3, 2, tzinfo=UTC)
        asked = await first.request_backfill(task, start, end, by="alice")
        paris = timezone(timedelta(hours=1))
        again = await second.request_backfill(
            task, start.astimezone(paris), end.astimezone(paris), by="bob"
        )
        assert again == asked, "the same window asked again is a second request"
        assert await second.backfills(task) == [asked]
        later = await second.request_backfill(task, end, end + timedelta(days=1), by="bob")
        assert await first.backfills(task) == [asked, later]
        assert await first.cancel_backfill(task, start, end) is True
        assert await second.backfills() == [later]
        assert await second.cancel_backfill(task, start, end) is False

    async def test_a_backfill_window_must_be_aware_and_not_empty(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        store = stores()
        naive = datetime(2026, 3, 1)  # the bad input under test
        aware = datetime(2026, 3, 1, tzinfo=UTC)
        with pytest.raises(ConfigurationError, match="timezone-aware"):
            await store.request_backfill(task, naive, aware, by="alice")
        with pytest.raises(ConfigurationError, match="must not be empty"):
            await store.request_backfill(task, aware, aware, by="alice")
        assert await store.backfills() == []

    # -- change mark -----------------------------------------------------------------------

    async def test_every_change_moves_the_mark_another_client_reads(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        operator, node = stores(), stores()
        marks = [await node.change_mark()]
        start = datetime(2026, 1, 1, tzinfo=UTC)
        every_minute = ScheduledDescriptor(target=task, fixed_rate=60.0, lock_name=task)

        async def moved(change: str) -> None:
            marks.append(await node.change_mark())
            assert marks[-1] != marks[-2], f"{change} did not move the mark: {marks}"

        await operator.pause(task, by="alice")
        await moved("a pause")
        await operator.resume(task)
        await moved("a resume")
        await operator.request_trigger(task, by="alice")
        await moved("a trigger")
        await operator.request_backfill(task, start, start + timedelta(hours=1), by="bob")
        await moved("a backfill")
        await operator.cancel_backfill(task, start, start + timedelta(hours=1))
        await moved("a cancelled backfill")
        await operator.add_schedule("marked", every_minute, by="alice")
        await moved("a runtime schedule added")
        await operator.remove_schedule("marked")
        await moved("a runtime schedule removed")
        # Reads, and taking a trigger, leave it where it was.
        await node.pauses()
        await node.changes()
        assert await node.take_trigger(task) is not None
        assert await node.change_mark() == marks[-1]

    # -- runtime schedules -------------------------------------------------------------------

    async def test_a_runtime_schedule_added_twice_is_one_and_can_be_removed(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        first, second = stores(), stores()
        every_minute = ScheduledDescriptor(
            target=task, fixed_rate=60, lock_name=task
        )  # an int, as hand-written code passes it
        assert await first.add_schedule("reports", every_minute, by="alice") is True
        # The same schedule spelled otherwise: an int rate, the default lock TTL explicit.
        same = ScheduledDescriptor(target=task, fixed_rate=60.0, lock_name=task, lock_ttl=30.0)
        assert await second.add_schedule("reports", same, by="bob") is False
        listed = await second.schedules()
        assert [(s.name, s.by) for s in listed] == [("reports", "alice")]
        assert listed[0].descriptor.fixed_rate == 60.0
        assert listed[0].descriptor.lock_ttl == 30.0, "the descriptor was not validated"
        other = ScheduledDescriptor(target=task, cron="0 3 * * *", lock_name=task)
        with pytest.raises(ScheduleConflict, match="reports"):
            await second.add_schedule("reports", other, by="bob")
        assert await second.remove_schedule("reports") is True
        assert await first.schedules() == []
        assert await first.remove_schedule("reports") is False
        assert await first.add_schedule("reports", other, by="bob") is True

    async def test_an_invalid_runtime_schedule_is_refused_naming_it(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        store = stores()
        no_trigger = ScheduledDescriptor(target=task)
        with pytest.raises(ConfigurationError, match="nightly"):
            await store.add_schedule("nightly", no_trigger, by="alice")
        bad_cron = ScheduledDescriptor(target=task, cron="61 * * * *")
        with pytest.raises(ConfigurationError, match="nightly"):
            await store.add_schedule("nightly", bad_cron, by="alice")
        assert await store.schedules() == []

    # -- what is refused, and isolation ------------------------------------------------------

    async def test_bad_names_and_operators_are_refused(
        self, stores: AsyncControlStores, task: str
    ) -> None:
        store = stores()
        with pytest.raises(ConfigurationError, match="not a target"):
            await store.pause("not a target", by="alice")
        with pytest.raises(ConfigurationError, match="who pauses"):
            await store.pause(task, by=" ")
        with pytest.raises(ConfigurationError, match="who triggers"):
            await store.request_trigger(task, by="")
        with pytest.raises(ConfigurationError, match="1000 characters"):
            await store.pause(task, by="alice", note="x" * 1001)
        assert await store.pauses() == []

    async def test_nothing_leaks_between_namespaces(
        self, stores: AsyncControlStores, neighbours: AsyncControlStores, task: str
    ) -> None:
        ours, theirs = stores(), neighbours()
        start, end = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
        await ours.pause(task, by="alice")
        await ours.pause_all(by="alice")
        await ours.request_trigger(task, by="alice")
        await ours.request_backfill(task, start, end, by="alice")
        await ours.add_schedule(
            "nightly", ScheduledDescriptor(target=task, cron="0 3 * * *"), by="a"
        )
        assert await theirs.pause_of(task) is None
        assert await theirs.pauses() == []
        assert await theirs.triggers() == []
        assert await theirs.take_trigger(task) is None
        assert await theirs.backfills() == []
        assert await theirs.schedules() == []
        assert await theirs.resume_all() is False
        assert await theirs.remove_schedule("nightly") is False
        # ... and the neighbour's attempts changed nothing of ours.
        assert len(await ours.pauses()) == 2
        assert len(await ours.triggers(task)) == 1
        assert len(await ours.schedules()) == 1

    async def test_an_unreachable_server_is_a_control_store_error_without_the_password(
        self, request: pytest.FixtureRequest
    ) -> None:
        try:
            store, secret = request.getfixturevalue("unreachable_control_store")
        except pytest.FixtureLookupError:
            pytest.skip("the backend supplies no unreachable_control_store")
        try:
            with pytest.raises(ControlStoreError) as raised:
                await store.pause_of("app.jobs:nightly")
            if secret is not None:
                assert secret not in str(raised.value)
                assert secret not in repr(store)
        finally:
            await store.aclose()
