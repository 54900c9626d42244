"""`MemoryRunHistory`: the history port in this process's memory (`memory://`).

For tests and single-process deployments. Each write is atomic under one mutex, with
exactly the rules of `history.port`, so the fire runner behaves the same on it as on
the SQL store. Other processes (another node, the `runs` command) never see it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence, Set
from dataclasses import replace
from datetime import datetime

from firefly_scheduling.history.base import (
    BaseRunHistory,
    RunEnd,
    RunStart,
    WholeRun,
    late_end,
    late_end_text,
    may_close,
    refusal,
    takes_over,
    whole_run_attempt,
)
from firefly_scheduling.history.port import (
    EXPIRED_BY_PRUNE,
    FAILURE_STATES,
    PLACEHOLDER_STATES,
    RETRIED_STATES,
    SCHEDULED,
    SUCCESS_STATES,
    NewRun,
    Recorded,
    RunRecord,
    RunState,
    checked_trigger,
    clip_error,
    clip_requested_by,
)
from firefly_scheduling.schedule.instants import as_utc

#: A record's key: (lock name, task target, instant in UTC).
_Key = tuple[str, str, datetime]


class MemoryRunHistory(BaseRunHistory):
    """A `RunHistory` kept in a dict; thread-safe."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._records: dict[_Key, RunRecord] = {}

    def _start(self, begin: RunStart) -> int | None:
        key = (begin.lock, begin.task, begin.instant)
        with self._mutex:
            current = self._records.get(key)
            running = _running(begin, 1)
            if current is None or current.state in PLACEHOLDER_STATES:
                pass
            elif current.state is RunState.RUNNING and takes_over(begin.token, current.token):
                running = _asked_as(current, _running(begin, current.attempt + 1))
            else:
                return None
            self._records[key] = running
            return running.attempt

    def start_new_many(self, runs: Sequence[NewRun], *, node: str, at: datetime) -> list[bool]:
        """`BatchStartingHistory.start_new_many`, under the one mutex."""
        at = as_utc(at)
        keys = [(run.lock, run.task, as_utc(run.instant)) for run in runs]
        with self._mutex:
            busy = {
                (record.lock, record.task)
                for record in self._records.values()
                if record.state is RunState.RUNNING
            }
            started: list[bool] = []
            for run, key in zip(runs, keys, strict=True):
                new = key not in self._records and (run.lock, run.task) not in busy
                if new:
                    begin = RunStart(run.lock, run.task, key[2], node, run.token, at)
                    self._records[key] = _running(begin, attempt=1)
                    busy.add((run.lock, run.task))
                started.append(new)
        return started

    def start_retry(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        token: int | None,
        after_attempt: int,
        note: str | None,
        at: datetime,
    ) -> int | None:
        """`RetryStartingHistory.start_retry`, under the one mutex."""
        key = (lock, task, as_utc(instant))
        with self._mutex:
            current = self._records.get(key)
            if (
                current is None
                or current.state not in RETRIED_STATES
                or current.attempt != after_attempt
            ):
                return None
            begin = RunStart(lock, task, key[2], node, token, as_utc(at))
            running = _running(begin, after_attempt + 1)
            self._records[key] = replace(_asked_as(current, running), error=clip_error(note))
            return after_attempt + 1

    def _finish(self, end: RunEnd) -> bool:
        key = (end.lock, end.task, end.instant)
        with self._mutex:
            current = self._records.get(key)
            if (
                current is None
                or current.state is not RunState.RUNNING
                or not may_close(end.token, current.token)
            ):
                return False
            self._records[key] = replace(current, state=end.state, ended_at=end.at, error=end.error)
            return True

    def _record_run(self, run: WholeRun) -> Recorded:
        key = (run.lock, run.task, run.instant)
        with self._mutex:
            current = self._records.get(key)
            attempt, trigger, asker, error = 1, run.trigger, run.requested_by, run.error
            if current is not None:
                refused = refusal(current.state, current.token, run.token, run.state)
                if refused is not None:
                    return refused
                attempt = whole_run_attempt(
                    current.state, current.attempt, current.token, run.token
                )
                if current.state not in PLACEHOLDER_STATES:
                    trigger, asker = current.trigger, current.requested_by
                if late_end(current.state, current.token, run.token, run.state):
                    error = late_end_text(run.error)
            self._records[key] = RunRecord(
                task=run.task,
                instant=run.instant,
                node=run.node,
                attempt=attempt,
                state=run.state,
                started_at=run.started_at,
                ended_at=run.ended_at,
                error=error,
                token=run.token,
                lock=run.lock,
                trigger=trigger,
                requested_by=asker,
            )
            return Recorded.WRITTEN

    def skip(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        reason: str,
        at: datetime,
        trigger: str = SCHEDULED,
        requested_by: str | None = None,
    ) -> bool:
        return self._mark(
            task,
            instant,
            lock=lock,
            node=node,
            reason=reason,
            at=at,
            trigger=checked_trigger(trigger),
            requested_by=clip_requested_by(requested_by),
        )

    def buffer(
        self, task: str, instant: datetime, *, lock: str, node: str, reason: str, at: datetime
    ) -> bool:
        state = RunState.BUFFERED
        return self._mark(task, instant, lock=lock, node=node, reason=reason, at=at, state=state)

    def _mark(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        reason: str,
        at: datetime,
        state: RunState = RunState.SKIPPED,
        trigger: str = SCHEDULED,
        requested_by: str | None = None,
    ) -> bool:
        """Insert a record no run owns (`state`) where the fire has none."""
        key = (lock, task, as_utc(instant))
        with self._mutex:
            if key in self._records:
                return False
            self._records[key] = RunRecord(
                task=task,
                instant=key[2],
                node=node,
                attempt=1,
                state=state,
                started_at=None,
                ended_at=as_utc(at),
                error=clip_error(reason),
                token=None,
                lock=lock,
                trigger=trigger,
                requested_by=requested_by,
            )
            return True

    def unfinished(self, task: str, *, lock: str) -> list[RunRecord]:
        with self._mutex:
            found = [
                r
                for r in self._records.values()
                if r.task == task and r.lock == lock and not r.state.terminal
            ]
        return sorted(found, key=lambda record: record.instant)

    def runs(
        self, task: str | None = None, limit: int = 20, *, lock: str | None = None
    ) -> list[RunRecord]:
        with self._mutex:
            found = [
                r
                for r in self._records.values()
                if (task is None or r.task == task) and (lock is None or r.lock == lock)
            ]
        found.sort(key=lambda record: (record.instant, record.task, record.lock), reverse=True)
        return found[: max(limit, 0)]

    def last_success(self, task: str, *, lock: str) -> RunRecord | None:
        with self._mutex:
            found = [
                r
                for r in self._records.values()
                if r.task == task and r.lock == lock and r.state in SUCCESS_STATES
            ]
        return max(found, key=lambda record: record.instant, default=None)

    def recorded_instants(
        self,
        task: str,
        *,
        lock: str,
        after: datetime,
        until: datetime,
        states: Set[RunState] | None = None,
    ) -> set[datetime]:
        after, until = as_utc(after), as_utc(until)
        with self._mutex:
            return {
                r.instant
                for r in self._records.values()
                if r.task == task
                and r.lock == lock
                and after < r.instant <= until
                and (states is None or r.state in states)
            }

    def records_between(
        self, task: str, *, lock: str, after: datetime, until: datetime, states: Set[RunState]
    ) -> list[RunRecord]:
        after, until = as_utc(after), as_utc(until)
        with self._mutex:
            found = [
                r
                for r in self._records.values()
                if r.task == task
                and r.lock == lock
                and after < r.instant <= until
                and r.state in states
            ]
        return sorted(found, key=lambda record: record.instant)

    def failures_since(self, since: datetime) -> list[RunRecord]:
        since = as_utc(since)
        with self._mutex:
            found = [
                r
                for r in self._records.values()
                if r.state in FAILURE_STATES and r.ended_at is not None and r.ended_at >= since
            ]
        return sorted(found, key=lambda record: record.instant, reverse=True)

    def expire_dead(self, started_before: datetime, *, at: datetime) -> int:
        started_before, at = as_utc(started_before), as_utc(at)
        with self._mutex:
            dead = [
                key
                for key, r in self._records.items()
                if r.state is RunState.RUNNING
                and r.started_at is not None
                and r.started_at < started_before
            ]
            for key in dead:
                self._records[key] = replace(
                    self._records[key],
                    state=RunState.EXPIRED,
                    ended_at=at,
                    error=EXPIRED_BY_PRUNE,
                )
        return len(dead)

    def prune(self, before: datetime) -> int:
        before = as_utc(before)
        with self._mutex:
            old = [
                key for key, r in self._records.items() if r.state.terminal and r.instant < before
            ]
            for key in old:
                del self._records[key]
        return len(old)

    def close(self) -> None:
        """Nothing to close; the records stay readable."""


def _running(begin: RunStart, attempt: int) -> RunRecord:
    """The record of `begin`'s run, `running` as attempt `attempt`."""
    return RunRecord(
        task=begin.task,
        instant=begin.instant,
        node=begin.node,
        attempt=attempt,
        state=RunState.RUNNING,
        started_at=begin.at,
        ended_at=None,
        error=None,
        token=begin.token,
        lock=begin.lock,
        trigger=begin.trigger,
        requested_by=begin.requested_by,
    )


def _asked_as(current: RunRecord, record: RunRecord) -> RunRecord:
    """`record` with the trigger and asker of `current`, the run it takes over."""
    return replace(record, trigger=current.trigger, requested_by=current.requested_by)
