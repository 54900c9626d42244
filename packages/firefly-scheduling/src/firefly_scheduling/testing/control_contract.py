# Generated from control_contract_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""The control store contract: what every adapter must do, on its real server.

A backend runs it by subclassing `ControlStoreContract` (or the generated
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

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from firefly_scheduling.control.records import ALL_TASKS, ControlStoreError, ScheduleConflict
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.testing.control_nodes import ControlStores
from firefly_scheduling.testing.control_races import ControlConcurrencyContract


class ControlStoreContract(ControlConcurrencyContract):
    """Every operation of the control store, across independent instances of one server."""

    # -- pause ----------------------------------------------------------------------

    def test_pause_and_resume_round_trip_with_who_why_and_when(
        self, stores: ControlStores, task: str
    ) -> None:
        operator, node = stores(), stores()
        assert node.pause_of(task) is None
        before = operator.now()
        paused = operator.pause(task, by="alice", note="database migration")
        after = operator.now()
        seen = node.pause_of(task)
        assert seen == paused
        assert (seen.task, seen.by, seen.note) == (task, "alice", "database migration")
        assert before <= seen.since <= after, "since is not the store's clock at the pause"
        assert node.resume(task) is True
        assert operator.pause_of(task) is None
        assert operator.resume(task) is False, "a second resume found a pause"

    def test_a_resume_keeps_the_stretch_it_lifted_and_lists_it_apart(
        self, stores: ControlStores, task: str
    ) -> None:
        # Resume is from now: a node must still tell a fire due while paused, read late.
        operator, node = stores(), stores()
        paused = operator.pause(task, by="alice", note="incident")
        assert operator.resume(task) is True
        resumed = operator.now()
        state = node.pause_state()
        assert state.in_force == []
        assert node.pauses() == []
        [stretch] = state.lifted
        assert (stretch.task, stretch.by, stretch.since) == (task, "alice", paused.since)
        assert stretch.until is not None
        assert paused.since <= stretch.until <= resumed
        assert stretch.holds(paused.since)
        assert not stretch.holds(stretch.until)
        operator.pause(task, by="bob")
        again = node.pause_state()
        assert [p.by for p in again.in_force] == ["bob"], "a new pause is not in force"
        assert again.lifted == [stretch], "pausing again changed the last lifted stretch"
        operator.resume(task)
        [latest] = (node.pause_state()).lifted
        assert latest.by == "bob", "a second resume did not replace the lifted stretch"

    def test_every_change_is_in_the_audit_trail_with_who_when_and_what(
        self, stores: ControlStores, task: str
    ) -> None:
        operator, reader = stores(), stores()
        window = (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC))
        schedule = f"audit-{uuid.uuid4().hex}"
        before = operator.now()
        operator.pause(task, by="alice", note="incident")
        operator.resume(task, by="bob")
        operator.resume(task, by="bob")  # nothing to lift: still a change asked
        asked = operator.request_trigger(task, by="carol")
        operator.request_backfill(task, *window, by="dan")
        operator.add_schedule(
            schedule, ScheduledDescriptor(target=task, fixed_rate=60.0, lock_name=task), by="erin"
        )
        operator.remove_schedule(schedule, by="frank")
        after = operator.now()
        trail = reader.changes(task)
        assert [(c.what, c.by, c.detail) for c in reversed(trail)] == [
            ("pause", "alice", "incident"),
            ("resume", "bob", "lifted"),
            ("resume", "bob", "was not paused"),
            ("trigger", "carol", asked.id),
            ("backfill", "dan", f"[{window[0].isoformat()}, {window[1].isoformat()})"),
        ]
        assert all(before <= c.at <= after for c in trail), "a change is not on the store's clock"
        on_schedule = reader.changes(schedule)
        assert [(c.what, c.by) for c in on_schedule] == [
            ("schedule remove", "frank"),
            ("schedule add", "erin"),
        ]
        assert (reader.changes(task, limit=1))[0].what == "backfill"

    def test_the_audit_trail_keeps_the_newest_changes_pruned_on_write(
        self, stores: ControlStores, task: str
    ) -> None:
        operator, reader = stores(), stores()
        operator.changes_kept = 3
        for n in range(5):
            operator.pause(task, by="alice", note=f"pause {n}")
        kept = reader.changes()
        assert [c.detail for c in kept] == ["pause 4", "pause 3", "pause 2"], (
            "the trail is not the newest changes_kept"
        )
        reader.resume(task, by="bob")  # a store keeping more prunes nothing
        assert [c.detail for c in reader.changes()][:2] == ["lifted", "pause 4"]
        assert len(reader.changes()) == 4

    def test_a_pause_written_by_one_client_is_read_by_another_at_once(
        self, stores: ControlStores, task: str
    ) -> None:
        operator, node = stores(), stores()
        for _ in range(3):
            assert node.pause_of(task) is None
            operator.pause(task, by="alice")
            assert node.pause_of(task) is not None, "a reader kept a stale answer"
            operator.resume(task)
        assert node.pause_of(task) is None

    def test_pausing_again_replaces_who_and_why(self, stores: ControlStores, task: str) -> None:
        first, second = stores(), stores()
        first.pause(task, by="alice", note="one")
        second.pause(task, by="bob", note="two")
        seen = first.pause_of(task)
        assert seen is not None
        assert (seen.by, seen.note) == ("bob", "two")
        assert [pause.task for pause in first.pauses()] == [task]

    def test_pause_all_holds_every_task_and_leaves_task_pauses(
        self, stores: ControlStores, task: str
    ) -> None:
        operator, node = stores(), stores()
        other = task.replace(":job", ":other")
        operator.pause(task, by="alice", note="own")
        fleet = operator.pause_all(by="bob", note="incident")
        assert fleet.task == ALL_TASKS
        assert fleet.all_tasks
        assert node.pause_of(other) == fleet
        assert node.pause_of(task) == fleet, "the fleet-wide pause is reported first"
        assert [pause.task for pause in node.pauses()] == [ALL_TASKS, task]
        assert node.resume_all() is True
        own = node.pause_of(task)
        assert own is not None, "resume_all lifted a task's own pause"
        assert own.note == "own"
        assert node.pause_of(other) is None

    def test_status_lists_every_pause_by_task(self, stores: ControlStores) -> None:
        operator, reader = stores(), stores()
        tasks = [f"app.status_{uuid.uuid4().hex}:job{index}" for index in range(3)]
        for index, name in enumerate(reversed(tasks)):
            operator.pause(name, by=f"op{index}", note="")
        listed = reader.pauses()
        assert [pause.task for pause in listed] == sorted(tasks)
        assert {pause.by for pause in listed} == {"op0", "op1", "op2"}

    # -- triggers -------------------------------------------------------------------------

    def test_a_trigger_removed_once_handled_is_gone_for_every_client(
        self, stores: ControlStores, task: str
    ) -> None:
        operator, node, other = stores(), stores(), stores()
        first = operator.request_trigger(task, by="alice")
        second = operator.request_trigger(task, by="bob")
        assert node.remove_trigger(first) is True
        assert other.remove_trigger(first) is False, "a trigger removed twice"
        assert other.triggers(task) == [second]

    def test_triggers_are_taken_oldest_first_and_only_for_their_task(
        self, stores: ControlStores, task: str
    ) -> None:
        operator, node = stores(), stores()
        other = task.replace(":job", ":other")
        first = operator.request_trigger(task, by="alice")
        second = operator.request_trigger(task, by="bob")
        elsewhere = operator.request_trigger(other, by="carol")
        assert [t.id for t in node.triggers(task)] == [first.id, second.id]
        assert node.take_trigger(task) == first
        assert node.take_trigger(task) == second
        assert node.take_trigger(task) is None
        assert node.triggers() == [elsewhere]

    # -- backfills -----------------------------------------------------------------------

    def test_a_backfill_asked_twice_is_one_request(self, stores: ControlStores, task: str) -> None:
        first, second = stores(), stores()
        start = datetime(2026, 3, 1, tzinfo=UTC)
        end = datetime(2026, 3, 2, tzinfo=UTC)
        asked = first.request_backfill(task, start, end, by="alice")
        paris = timezone(timedelta(hours=1))
        again = second.request_backfill(
            task, start.astimezone(paris), end.astimezone(paris), by="bob"
        )
        assert again == asked, "the same window asked again is a second request"
        assert second.backfills(task) == [asked]
        later = second.request_backfill(task, end, end + timedelta(days=1), by="bob")
        assert first.backfills(task) == [asked, later]
        assert first.cancel_backfill(task, start, end) is True
        assert second.backfills() == [later]
        assert second.cancel_backfill(task, start, end) is False

    def test_a_backfill_window_must_be_aware_and_not_empty(
        self, stores: ControlStores, task: str
    ) -> None:
        store = stores()
        naive = datetime(2026, 3, 1)  # the bad input under test
        aware = datetime(2026, 3, 1, tzinfo=UTC)
        with pytest.raises(ConfigurationError, match="timezone-aware"):
            store.request_backfill(task, naive, aware, by="alice")
        with pytest.raises(ConfigurationError, match="must not be empty"):
            store.request_backfill(task, aware, aware, by="alice")
        assert store.backfills() == []

    # -- change mark -----------------------------------------------------------------------

    def test_every_change_moves_the_mark_another_client_reads(
        self, stores: ControlStores, task: str
    ) -> None:
        operator, node = stores(), stores()
        marks = [node.change_mark()]
        start = datetime(2026, 1, 1, tzinfo=UTC)
        every_minute = ScheduledDescriptor(target=task, fixed_rate=60.0, lock_name=task)

        def moved(change: str) -> None:
            marks.append(node.change_mark())
            assert marks[-1] != marks[-2], f"{change} did not move the mark: {marks}"

        operator.pause(task, by="alice")
        moved("a pause")
        operator.resume(task)
        moved("a resume")
        operator.request_trigger(task, by="alice")
        moved("a trigger")
        operator.request_backfill(task, start, start + timedelta(hours=1), by="bob")
        moved("a backfill")
        operator.cancel_backfill(task, start, start + timedelta(hours=1))
        moved("a cancelled backfill")
        operator.add_schedule("marked", every_minute, by="alice")
        moved("a runtime schedule added")
        operator.remove_schedule("marked")
        moved("a runtime schedule removed")
        # Reads, and taking a trigger, leave it where it was.
        node.pauses()
        node.changes()
        assert node.take_trigger(task) is not None
        assert node.change_mark() == marks[-1]

    # -- runtime schedules -------------------------------------------------------------------

    def test_a_runtime_schedule_added_twice_is_one_and_can_be_removed(
        self, stores: ControlStores, task: str
    ) -> None:
        first, second = stores(), stores()
        every_minute = ScheduledDescriptor(
            target=task, fixed_rate=60, lock_name=task
        )  # an int, as hand-written code passes it
        assert first.add_schedule("reports", every_minute, by="alice") is True
        # The same schedule spelled otherwise: an int rate, the default lock TTL explicit.
        same = ScheduledDescriptor(target=task, fixed_rate=60.0, lock_name=task, lock_ttl=30.0)
        assert second.add_schedule("reports", same, by="bob") is False
        listed = second.schedules()
        assert [(s.name, s.by) for s in listed] == [("reports", "alice")]
        assert listed[0].descriptor.fixed_rate == 60.0
        assert listed[0].descriptor.lock_ttl == 30.0, "the descriptor was not validated"
        other = ScheduledDescriptor(target=task, cron="0 3 * * *", lock_name=task)
        with pytest.raises(ScheduleConflict, match="reports"):
            second.add_schedule("reports", other, by="bob")
        assert second.remove_schedule("reports") is True
        assert first.schedules() == []
        assert first.remove_schedule("reports") is False
        assert first.add_schedule("reports", other, by="bob") is True

    def test_an_invalid_runtime_schedule_is_refused_naming_it(
        self, stores: ControlStores, task: str
    ) -> None:
        store = stores()
        no_trigger = ScheduledDescriptor(target=task)
        with pytest.raises(ConfigurationError, match="nightly"):
            store.add_schedule("nightly", no_trigger, by="alice")
        bad_cron = ScheduledDescriptor(target=task, cron="61 * * * *")
        with pytest.raises(ConfigurationError, match="nightly"):
            store.add_schedule("nightly", bad_cron, by="alice")
        assert store.schedules() == []

    # -- what is refused, and isolation ------------------------------------------------------

    def test_bad_names_and_operators_are_refused(self, stores: ControlStores, task: str) -> None:
        store = stores()
        with pytest.raises(ConfigurationError, match="not a target"):
            store.pause("not a target", by="alice")
        with pytest.raises(ConfigurationError, match="who pauses"):
            store.pause(task, by=" ")
        with pytest.raises(ConfigurationError, match="who triggers"):
            store.request_trigger(task, by="")
        with pytest.raises(ConfigurationError, match="1000 characters"):
            store.pause(task, by="alice", note="x" * 1001)
        assert store.pauses() == []

    def test_nothing_leaks_between_namespaces(
        self, stores: ControlStores, neighbours: ControlStores, task: str
    ) -> None:
        ours, theirs = stores(), neighbours()
        start, end = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
        ours.pause(task, by="alice")
        ours.pause_all(by="alice")
        ours.request_trigger(task, by="alice")
        ours.request_backfill(task, start, end, by="alice")
        ours.add_schedule("nightly", ScheduledDescriptor(target=task, cron="0 3 * * *"), by="a")
        assert theirs.pause_of(task) is None
        assert theirs.pauses() == []
        assert theirs.triggers() == []
        assert theirs.take_trigger(task) is None
        assert theirs.backfills() == []
        assert theirs.schedules() == []
        assert theirs.resume_all() is False
        assert theirs.remove_schedule("nightly") is False
        # ... and the neighbour's attempts changed nothing of ours.
        assert len(ours.pauses()) == 2
        assert len(ours.triggers(task)) == 1
        assert len(ours.schedules()) == 1

    def test_an_unreachable_server_is_a_control_store_error_without_the_password(
        self, request: pytest.FixtureRequest
    ) -> None:
        try:
            store, secret = request.getfixturevalue("unreachable_control_store")
        except pytest.FixtureLookupError:
            pytest.skip("the backend supplies no unreachable_control_store")
        try:
            with pytest.raises(ControlStoreError) as raised:
                store.pause_of("app.jobs:nightly")
            if secret is not None:
                assert secret not in str(raised.value)
                assert secret not in repr(store)
        finally:
            store.close()
