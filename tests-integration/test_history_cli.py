"""`runs`, `monitor` and `prune` end to end, on a SQLite history written by real fires."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from firefly_scheduling.cli import main
from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import RunState
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.manifest import ScheduledManifest
from firefly_scheduling_database.sql_history.store import SqlRunHistory

HEALTHY = "app.jobs:healthy"
BROKEN = "app.jobs:broken"


def task(target: str) -> ScheduledDescriptor:
    return ScheduledDescriptor(target=target, fixed_rate=60.0, lock_name=target, lock_ttl=30.0)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, SqlRunHistory]:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    monkeypatch.setenv("FIREFLY_SCHEDULING_HISTORY_URL", url)
    manifest = tmp_path / "scheduled.json"
    ScheduledManifest.compile([task(HEALTHY), task(BROKEN)], manifest)
    return manifest, SqlRunHistory(url)


def fire(history: SqlRunHistory, target: str, instant: datetime, fails: bool) -> None:
    def body() -> None:
        if fails:
            raise RuntimeError("upstream 503")

    FireRunner(InMemoryLock(), history=history, clock=lambda: instant, node="n1").run(
        Fire.at(task(target), instant), body
    )


def test_runs_lists_the_newest_fire_first(workspace: tuple[Path, SqlRunHistory]) -> None:
    _, history = workspace
    now = datetime.now(UTC).replace(microsecond=0)
    fire(history, HEALTHY, now - timedelta(minutes=2), fails=False)
    fire(history, BROKEN, now - timedelta(minutes=1), fails=True)
    result = CliRunner().invoke(main, ["runs", "--limit", "5"])
    assert result.exit_code == 0, result.output
    assert result.output.index(BROKEN) < result.output.index(HEALTHY)
    # The error column wraps at its width: the message's words, in order, on its row.
    error = result.output.index("RuntimeError: upstream")
    assert error < result.output.index("503", error) < result.output.index(HEALTHY)
    only = CliRunner().invoke(main, ["runs", "--task", HEALTHY])
    assert HEALTHY in only.output
    assert BROKEN not in only.output
    by_lock = CliRunner().invoke(main, ["runs", "--lock", BROKEN])
    assert by_lock.exit_code == 0, by_lock.output
    assert "Lock" in by_lock.output
    assert BROKEN in by_lock.output
    assert HEALTHY not in by_lock.output


def test_monitor_fails_on_a_broken_task_and_passes_once_it_recovers(
    workspace: tuple[Path, SqlRunHistory],
) -> None:
    manifest, history = workspace
    now = datetime.now(UTC)
    fire(history, HEALTHY, now - timedelta(seconds=30), fails=False)
    fire(history, BROKEN, now - timedelta(seconds=30), fails=True)
    failing = CliRunner().invoke(main, ["monitor", "--manifest", str(manifest)])
    assert failing.exit_code == 1, failing.output
    assert f"FAIL {BROKEN}: no successful run recorded" in failing.output
    assert f"FAIL {BROKEN}: failed" in failing.output
    assert HEALTHY not in failing.output
    recovered = CliRunner().invoke(
        main, ["monitor", "--manifest", str(manifest), "--failures-within", "10s"]
    )
    assert recovered.exit_code == 1  # still no success for BROKEN
    fire(history, BROKEN, now, fails=False)
    healthy = CliRunner().invoke(
        main, ["monitor", "--manifest", str(manifest), "--failures-within", "10s"]
    )
    assert healthy.exit_code == 0, healthy.output
    assert "OK: 2 task(s) healthy" in healthy.output


def test_monitor_does_not_judge_a_freshly_deployed_daily_task_before_its_first_fire(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    monkeypatch.setenv("FIREFLY_SCHEDULING_HISTORY_URL", url)
    monkeypatch.setenv("FIREFLY_SCHEDULING_INITIAL_DELAY_STORE", url)  # first sightings kept
    SqlRunHistory(url).close()  # the tables exist, as after `migrate`
    manifest = tmp_path / "scheduled.json"
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("0 3 %d %m *")
    nightly = ScheduledDescriptor(
        target="app.jobs:nightly", cron=tomorrow, lock_name="app.jobs:nightly", lock_ttl=30.0
    )
    ScheduledManifest.compile([nightly], manifest)
    first = CliRunner().invoke(main, ["monitor", "--manifest", str(manifest)])
    assert first.exit_code == 0, first.output
    assert "1 not judged yet" in first.output
    as_json = CliRunner().invoke(main, ["monitor", "--manifest", str(manifest), "--json"])
    assert as_json.exit_code == 0, as_json.output
    row = json.loads(as_json.output)
    assert row["judged"] is False
    assert row["healthy"] is True
    assert row["first_seen"] is not None  # the first run's sighting, read back
    assert row["first_due"].startswith(datetime.now(UTC).date().isoformat()) is False


def test_monitor_forgets_a_failure_once_a_later_fire_succeeded(
    workspace: tuple[Path, SqlRunHistory],
) -> None:
    manifest, history = workspace
    now = datetime.now(UTC)
    fire(history, HEALTHY, now - timedelta(seconds=30), fails=False)
    fire(history, BROKEN, now - timedelta(minutes=2), fails=True)
    fire(history, BROKEN, now - timedelta(minutes=1), fails=False)
    result = CliRunner().invoke(main, ["monitor", "--manifest", str(manifest)])
    assert result.exit_code == 0, result.output
    assert "OK: 2 task(s) healthy" in result.output


def test_prune_expires_died_runs_and_deletes_old_records(
    workspace: tuple[Path, SqlRunHistory],
) -> None:
    _, history = workspace
    now = datetime.now(UTC)
    old = now - timedelta(days=10)
    fire(history, HEALTHY, old, fails=False)
    fire(history, HEALTHY, now, fails=False)
    history.start(
        BROKEN,
        now - timedelta(days=2),
        lock=BROKEN,
        node="died",
        token=1,
        at=now - timedelta(days=2),
    )
    history.start(BROKEN, now - timedelta(minutes=5), lock=BROKEN, node="alive", token=2, at=now)
    result = CliRunner().invoke(main, ["prune", "--days", "7"])
    assert result.exit_code == 0, result.output
    assert "closed 1 died run(s) as expired" in result.output
    assert "deleted 1 record(s)" in result.output
    states = {(r.task, r.node): r.state for r in history.runs(limit=10)}
    assert states == {
        (HEALTHY, "n1"): RunState.SUCCEEDED,
        (BROKEN, "died"): RunState.EXPIRED,
        (BROKEN, "alive"): RunState.RUNNING,
    }


def test_prune_days_0_keeps_every_fire_a_node_may_still_run_or_adopt(
    workspace: tuple[Path, SqlRunHistory], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`prune --days 0` deleted a finished fire still inside grace + skew.

    Deleted, the record no longer stops a node waking late within grace: the fire
    ran a second time. Grace 60 s and skew 5 s here, so 65 s is the horizon.
    """
    _, history = workspace
    monkeypatch.setenv("FIREFLY_SCHEDULING_FIRES_GRACE", "60s")
    monkeypatch.setenv("FIREFLY_SCHEDULING_FIRES_CLOCK_SKEW", "5s")
    now = datetime.now(UTC)
    inside, outside = now - timedelta(seconds=50), now - timedelta(seconds=120)
    fire(history, HEALTHY, inside, fails=False)
    fire(history, HEALTHY, outside, fails=False)
    history.skip(BROKEN, inside, lock=BROKEN, node="late", reason="late", at=now)

    result = CliRunner().invoke(main, ["prune", "--days", "0"])

    assert result.exit_code == 0, result.output
    assert "deleted 1 record(s)" in result.output
    assert "grace + clock skew (1m5s)" in result.output
    kept = {(r.task, r.instant, r.state) for r in history.runs(limit=10)}
    assert kept == {(HEALTHY, inside, RunState.SUCCEEDED), (BROKEN, inside, RunState.SKIPPED)}
    # A node waking late within grace, whose claim is gone (the claim server restarted),
    # is still refused by the record: the fire is finished.
    assert history.start(HEALTHY, inside, lock=HEALTHY, node="late", token=99, at=now) is None


@pytest.mark.parametrize("days", ["-1", "abc", "nan", "inf", "-inf", "1e9", "", "7 days"])
def test_prune_refuses_a_bad_days_value_with_exit_2(
    workspace: tuple[Path, SqlRunHistory], days: str
) -> None:
    _, history = workspace
    now = datetime.now(UTC)
    fire(history, HEALTHY, now - timedelta(days=30), fails=False)
    result = CliRunner().invoke(main, ["prune", "--days", days])
    assert result.exit_code == 2, result.output
    assert "--days" in result.output
    assert repr(days) in result.output or days in result.output
    assert "Traceback" not in result.output
    assert len(history.runs(limit=10)) == 1, "a refused prune deleted something"


def test_without_a_history_the_commands_say_how_to_configure_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FIREFLY_SCHEDULING_HISTORY_URL", "off")
    result = CliRunner().invoke(main, ["runs"])
    assert result.exit_code == 2
    assert "FIREFLY_SCHEDULING_HISTORY_URL" in result.output
