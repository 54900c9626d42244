"""Operating the CLI: honest tick exit codes, JSON Lines, structured logs, safe defaults.

`tick` exits 1 when a fire's body or backend failed (so a CronJob alerts)
and 0 when every fire succeeded or was legitimately not run; `--json` prints one
object per row with stable keys; `--log-format json` logs JSON objects; locked tasks
under a lock that excludes nothing across processes draw a WARNING, or a refusal
(exit 2) when `FIREFLY_SCHEDULING_LOCK_REQUIRED` is set; tables never break a
target mid-word.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks
from firefly_fake_clock import FakeClock

from firefly_scheduling import InMemoryLock, ScheduledDescriptor, Settings
from firefly_scheduling.cli import main
from firefly_scheduling.cli.host_options import JsonLogFormatter
from firefly_scheduling.cli.schedule import render_schedule
from firefly_scheduling.errors import ConfigurationError, LockBackendError
from firefly_scheduling.fires.outcome import Verdict
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.tick import TickHost

MODULE = "firefly_host_unit_tasks"
MINUTE = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)  # a Wednesday
SUPPORT = str(Path(__file__).resolve().parent / "host_support")


def task(name: str, **trigger: object) -> ScheduledDescriptor:
    return ScheduledDescriptor(target=f"{MODULE}:{name}", **trigger)  # type: ignore[arg-type]


def tick_report(descriptors: list[ScheduledDescriptor]) -> object:
    runtime = build_runtime(descriptors, Settings(lock_provider="memory"), host="tick", node="t")
    return TickHost(descriptors, runtime, clock=FakeClock(MINUTE), grace_period=5.0).run()


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    tasks.reset()


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for variable in (
        "FIREFLY_SCAN_PACKAGES",
        "FIREFLY_SCHEDULING_LOCK_PROVIDER",
        "FIREFLY_SCHEDULING_LOCK_REQUIRED",
    ):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("FIREFLY_SCHEDULING_MANIFEST", str(tmp_path / "absent.json"))
    return CliRunner()


# -- tick's exit status --------------------------------------------------------------


def test_a_tick_whose_body_failed_exits_1() -> None:
    report = tick_report([task("boom", cron="* * * * *"), task("ping", cron="* * * * *")])
    assert report.exit_status == 1  # type: ignore[attr-defined]
    assert [r.verdict for r in report.problems()] == [Verdict.FAILED]  # type: ignore[attr-defined]


def test_a_tick_that_met_a_backend_error_exits_1() -> None:
    class BrokenLock:
        """A port-only lock whose server answers every call with an error."""

        def try_acquire(self, name: str, ttl_seconds: float) -> bool:
            raise LockBackendError(f"the test backend refuses {name!r}")

        def release(self, name: str) -> None:
            raise LockBackendError(f"the test backend refuses {name!r}")

    descriptors = [task("ping", cron="* * * * *", lock_name="ping", lock_ttl=30.0)]
    # Not eager: at boot such a backend is refused (exit 3, test_boot_checks); here it
    # fails once the host runs.
    runtime = build_runtime(
        descriptors, Settings(), host="tick", node="t", lock=BrokenLock(), eager=False
    )
    report = TickHost(descriptors, runtime, clock=FakeClock(MINUTE), grace_period=5.0).run()
    assert [r.verdict for r in report.results] == [Verdict.BACKEND_ERROR]
    assert report.exit_status == 1
    assert tasks.calls("ping") == []


def test_a_tick_where_every_fire_succeeded_or_was_claimed_elsewhere_exits_0() -> None:
    descriptor = task("ping", cron="* * * * *", lock_name="held", lock_ttl=30.0)
    elsewhere = InMemoryLock()
    assert elsewhere.try_acquire("held", 30)
    try:
        report = tick_report([descriptor, task("pong", cron="* * * * *")])
    finally:
        elsewhere.release("held")
    verdicts = sorted(r.verdict.name for r in report.results)  # type: ignore[attr-defined]
    assert verdicts == ["OVERLAPPING", "SUCCEEDED"]
    assert report.exit_status == 0  # type: ignore[attr-defined]


def test_tick_json_rows_have_stable_keys_and_parse() -> None:
    report = tick_report([task("boom", cron="* * * * *"), task("ping", fixed_rate=30.0)])
    rows = report.rows()  # type: ignore[attr-defined]
    decoded = [json.loads(json.dumps(row)) for row in rows]
    assert {tuple(sorted(row)) for row in decoded} == {
        (
            "adoption",
            "attempt",
            "ended_at",
            "error",
            "instant",
            "node",
            "started_at",
            "target",
            "token",
            "trigger",
            "verdict",
        )
    }
    by_target = sorted((row["target"].partition(":")[2], row["verdict"]) for row in decoded)
    assert by_target == [("boom", "failed"), ("ping", "succeeded"), ("ping", "succeeded")]
    failed = next(row for row in decoded if row["verdict"] == "failed")
    assert "boom" in failed["error"]
    assert datetime.fromisoformat(failed["instant"]) == MINUTE
    assert {row["trigger"] for row in decoded} == {"scheduled"}


# -- --json on the listing commands ---------------------------------------------------


def test_schedule_json_prints_one_object_per_task(runner: CliRunner) -> None:
    arguments = ["schedule", "--path", SUPPORT, "--app", "firefly_host_unit_app", "--json"]
    result = runner.invoke(main, arguments)
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in result.output.splitlines()]
    assert row["target"] == "firefly_host_unit_app:heartbeat"
    assert row["fixed_rate"] == pytest.approx(0.2)
    assert row["lock"] == "firefly_host_unit_app:heartbeat"
    assert row["cron"] is None
    assert datetime.fromisoformat(row["next_fire"]).tzinfo is not None


def test_runs_json_prints_one_object_per_fire(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("firefly_scheduling_database")
    from firefly_scheduling_database.sql_history.store import SqlRunHistory  # noqa: PLC0415

    url = f"sqlite:///{tmp_path / 'history.db'}"
    history = SqlRunHistory(url)
    instant = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)
    try:
        history.install()
        attempt = history.start("app:job", instant, lock="app:job", node="n1", token=7, at=instant)
        assert attempt is not None
    finally:
        history.close()
    monkeypatch.setenv("FIREFLY_SCHEDULING_HISTORY_URL", url)
    result = runner.invoke(main, ["runs", "--json"])
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in result.output.splitlines()]
    assert row["target"] == "app:job"
    assert row["lock"] == "app:job"
    assert row["state"] == "running"
    assert row["node"] == "n1"
    assert row["attempt"] == 1
    assert row["token"] == 7
    assert datetime.fromisoformat(row["instant"]) == instant


def test_runs_shows_a_timed_out_run_as_such(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    timed_out_run: Callable[[str, str, datetime], None],
) -> None:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    timed_out_run(url, "app:job", datetime(2026, 6, 3, 12, 0, tzinfo=UTC))
    monkeypatch.setenv("FIREFLY_SCHEDULING_HISTORY_URL", url)
    listed = runner.invoke(main, ["runs", "--json"])
    assert listed.exit_code == 0, listed.output
    [row] = [json.loads(line) for line in listed.output.splitlines()]
    assert (row["state"], row["error"]) == ("timed_out", "timed out after 30s")
    table = runner.invoke(main, ["runs"])
    assert table.exit_code == 0, table.output
    assert "timed_out" in table.output


def test_runs_shows_which_retry_a_run_was(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fire whose first run failed and whose retry 1 of 2 failed too, recorded by the
    fire runner: `runs` shows the attempt and the retry."""
    pytest.importorskip("firefly_scheduling_database")
    from firefly_scheduling.fires.outcome import Fire  # noqa: PLC0415 - after the skip
    from firefly_scheduling.fires.runner import FireRunner  # noqa: PLC0415
    from firefly_scheduling.locks import InMemoryLock  # noqa: PLC0415
    from firefly_scheduling.tasks.descriptor import ScheduledDescriptor  # noqa: PLC0415
    from firefly_scheduling_database.sql_history.store import SqlRunHistory  # noqa: PLC0415

    url = f"sqlite:///{tmp_path / 'history.db'}"
    history = SqlRunHistory(url)
    history.install()
    target = f"app:retried_{tmp_path.name}"
    task = ScheduledDescriptor(
        target=target,
        lock_name=target,
        lock_ttl=30.0,
        cron="0 * * * *",
        retries=2,
        retry_backoff=1.0,
        retry_backoff_max=1.0,
    )
    instant = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)
    now = [instant]
    fires = FireRunner(InMemoryLock(), history=history, clock=lambda: now[0])

    def body() -> None:
        raise RuntimeError("boom")

    try:
        failed = fires.run(Fire.at(task, instant), body)
        assert failed.retry is not None
        now[0] = failed.retry.due
        again = fires.run(failed.retry, body)
        assert again.retry is not None  # retry 2 of 2 follows: left pending here
    finally:
        fires.close()
        history.close()
    monkeypatch.setenv("FIREFLY_SCHEDULING_HISTORY_URL", url)
    listed = runner.invoke(main, ["runs", "--json"])
    assert listed.exit_code == 0, listed.output
    [row] = [json.loads(line) for line in listed.output.splitlines()]
    assert (row["state"], row["attempt"]) == ("failed", 2)
    assert row["error"].startswith("retry 1 of 2; RuntimeError: boom; retry 2 of 2 due ")
    table = runner.invoke(main, ["runs"], env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    assert "retry 1 of 2; RuntimeError: boom; retry 2 of 2 due" in " ".join(table.output.split())


def test_runs_shows_a_caught_up_run_with_its_reason(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caught_up_run: Callable[[str, str, datetime], None],
) -> None:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    caught_up_run(url, "app:job", datetime(2026, 6, 3, 12, 0, tzinfo=UTC))
    monkeypatch.setenv("FIREFLY_SCHEDULING_HISTORY_URL", url)
    listed = runner.invoke(main, ["runs", "--json"])
    assert listed.exit_code == 0, listed.output
    [row] = [json.loads(line) for line in listed.output.splitlines()]
    assert row["state"] == "caught_up"
    assert row["error"].startswith("caught up: missed while the fleet was down")
    table = runner.invoke(main, ["runs"])
    assert table.exit_code == 0, table.output
    assert "caught_up" in table.output


# -- structured logs ------------------------------------------------------------------


def test_json_log_lines_carry_time_level_node_logger_and_message() -> None:
    record = logging.LogRecord(
        "firefly_scheduling.hosts", logging.WARNING, __file__, 1, "fire %s late", ("x",), None
    )
    entry = json.loads(JsonLogFormatter("node-7").format(record))
    assert entry["level"] == "WARNING"
    assert entry["node"] == "node-7"
    assert entry["logger"] == "firefly_scheduling.hosts"
    assert entry["message"] == "fire x late"
    assert datetime.fromisoformat(entry["time"]).tzinfo is not None


# -- safe defaults --------------------------------------------------------------------


def test_locked_tasks_under_the_none_provider_draw_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    descriptors = [task("ping", cron="* * * * *", lock_name="ping", lock_ttl=30.0)]
    with caplog.at_level(logging.INFO, logger="firefly_scheduling.hosts"):
        runtime = build_runtime(descriptors, Settings(lock_provider="none"), host="tick", node="t")
    runtime.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("1 locked task(s)" in w and "every node will run them" in w for w in warnings)
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("lock provider 'none'" in line for line in infos)


def test_lock_required_turns_the_warning_into_a_refusal() -> None:
    descriptors = [task("ping", cron="* * * * *", lock_name="ping", lock_ttl=30.0)]
    settings = Settings.from_env(
        {"FIREFLY_SCHEDULING_LOCK_PROVIDER": "memory", "FIREFLY_SCHEDULING_LOCK_REQUIRED": "true"}
    )
    with pytest.raises(ConfigurationError, match="FIREFLY_SCHEDULING_LOCK_REQUIRED"):
        build_runtime(descriptors, settings, host="run", node="t")


def test_lock_required_refusal_exits_2_from_the_cli(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_REQUIRED", "yes")
    arguments = ["tick", "--path", SUPPORT, "--app", "firefly_host_unit_app"]
    result = runner.invoke(main, arguments)
    assert result.exit_code == 2, result.output
    assert "firefly_host_unit_app:heartbeat" in result.output


def test_a_bad_lock_required_value_is_refused_naming_it() -> None:
    with pytest.raises(ConfigurationError, match="'maybe'"):
        Settings.from_env({"FIREFLY_SCHEDULING_LOCK_REQUIRED": "maybe"})


def test_unlocked_tasks_under_none_draw_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="firefly_scheduling.hosts"):
        runtime = build_runtime(
            [task("ping", cron="* * * * *")], Settings(lock_provider="none"), host="run", node="t"
        )
    runtime.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# -- tables ---------------------------------------------------------------------------


def test_a_narrow_table_never_breaks_a_target_mid_word() -> None:
    target = f"{MODULE}:" + "a_rather_long_task_name_that_will_not_fit_in_forty_columns"
    console = Console(width=40, record=True, force_terminal=False)
    render_schedule(
        [ScheduledDescriptor(target=target, fixed_rate=60.0)], "1 task", console, MINUTE
    )
    assert target in console.export_text()
