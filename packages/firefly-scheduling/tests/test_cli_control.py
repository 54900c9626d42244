"""`pause`, `resume` and `status` against a `memory://` control store, and their refusals."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from firefly_scheduling.cli import main
from firefly_scheduling.control.memory import MemoryControlStore

SUPPORT = str(Path(__file__).resolve().parent / "host_support")


def _env() -> dict[str, str]:
    return {"FIREFLY_SCHEDULING_CONTROL_URL": f"memory://cli-{uuid.uuid4().hex}"}


def test_pause_status_resume_round_trip() -> None:
    env, runner = _env(), CliRunner()
    paused = runner.invoke(
        main, ["pause", "app.jobs:nightly", "--by", "alice", "--note", "db"], env=env
    )
    assert paused.exit_code == 0, paused.output
    assert "app.jobs:nightly paused by alice since" in paused.output
    store = MemoryControlStore(env["FIREFLY_SCHEDULING_CONTROL_URL"])
    recorded = store.pause_of("app.jobs:nightly")
    assert recorded is not None
    assert (recorded.by, recorded.note) == ("alice", "db")
    shown = runner.invoke(main, ["status", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    [row] = [json.loads(line) for line in shown.output.splitlines()]
    assert (row["target"], row["paused"], row["by"], row["note"]) == (
        "app.jobs:nightly",
        True,
        "alice",
        "db",
    )
    resumed = runner.invoke(main, ["resume", "app.jobs:nightly"], env=env)
    assert resumed.output.strip() == "app.jobs:nightly resumed"
    again = runner.invoke(main, ["resume", "app.jobs:nightly"], env=env)
    assert again.output.strip() == "app.jobs:nightly was not paused"
    assert store.pause_of("app.jobs:nightly") is None
    assert runner.invoke(main, ["status"], env=env).output.strip() == "no task is paused"


def test_status_json_shows_who_resumed_when() -> None:
    env, runner = _env(), CliRunner()
    runner.invoke(main, ["pause", "app.jobs:e", "--by", "alice", "--note", "psp"], env=env)
    resumed = runner.invoke(main, ["resume", "app.jobs:e", "--by", "bob"], env=env)
    assert resumed.exit_code == 0, resumed.output
    runner.invoke(main, ["pause", "--all", "--by", "carol"], env=env)
    runner.invoke(main, ["resume", "--all", "--by", "dan"], env=env)
    shown = runner.invoke(main, ["status", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    rows = {row["target"]: row for row in map(json.loads, shown.output.splitlines())}
    task = rows["app.jobs:e"]
    assert task["paused"] is False
    assert [(c["change"], c["by"], c["detail"]) for c in task["changes"]] == [
        ("resume", "bob", "lifted"),
        ("pause", "alice", "psp"),
    ]
    assert all(c["at"] is not None for c in task["changes"])
    fleet = rows["*"]
    assert (fleet["paused"], fleet["all_tasks"]) == (False, True)
    assert [(c["change"], c["by"]) for c in fleet["changes"]] == [
        ("resume", "dan"),
        ("pause", "carol"),
    ]
    one = runner.invoke(main, ["status", "app.jobs:e", "--json", "--changes", "1"], env=env)
    [row] = [json.loads(line) for line in one.output.splitlines()]
    assert [c["change"] for c in row["changes"]] == ["resume"]


def test_pause_all_is_shown_first_and_lifted_by_resume_all() -> None:
    env, runner = _env(), CliRunner()
    runner.invoke(main, ["pause", "app.jobs:b", "--by", "bob"], env=env)
    fleet = runner.invoke(main, ["pause", "--all", "--by", "carol", "--note", "incident"], env=env)
    assert fleet.exit_code == 0, fleet.output
    lines = runner.invoke(main, ["status"], env=env).output.splitlines()
    assert lines[0].startswith("every task paused by carol")
    assert lines[1].startswith("app.jobs:b paused by bob")
    assert runner.invoke(main, ["resume", "--all"], env=env).output.strip() == "every task resumed"


def test_without_a_durable_store_it_exits_2_naming_the_setting() -> None:
    result = CliRunner().invoke(
        main,
        ["pause", "app.jobs:a", "--by", "x"],
        env={"FIREFLY_SCHEDULING_LOCK_PROVIDER": "memcached"},
    )
    assert result.exit_code == 2, result.output
    assert "FIREFLY_SCHEDULING_CONTROL_URL" in result.output


def test_a_bad_target_or_both_a_target_and_all_exit_2() -> None:
    env, runner = _env(), CliRunner()
    bad = runner.invoke(main, ["pause", "not a target", "--by", "x"], env=env)
    assert bad.exit_code == 2, bad.output
    assert "'not a target'" in bad.output
    both = runner.invoke(main, ["pause", "app.jobs:a", "--all", "--by", "x"], env=env)
    assert both.exit_code == 2, both.output
    neither = runner.invoke(main, ["resume"], env=env)
    assert neither.exit_code == 2, neither.output
    assert runner.invoke(main, ["status"], env=env).output.strip() == "no task is paused"


def test_status_of_one_task_and_pause_json() -> None:
    env, runner = _env(), CliRunner()
    shown = runner.invoke(main, ["pause", "app.jobs:c", "--by", "dan", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    [row] = [json.loads(line) for line in shown.output.splitlines()]
    assert (row["target"], row["paused"], row["by"]) == ("app.jobs:c", True, "dan")
    assert row["since"] is not None
    other = runner.invoke(main, ["status", "app.jobs:d", "--json"], env=env)
    [state] = [json.loads(line) for line in other.output.splitlines()]
    assert (state["target"], state["paused"], state["by"], state["since"]) == (
        "app.jobs:d",
        False,
        None,
        None,
    )
    assert runner.invoke(main, ["status", "app.jobs:d"], env=env).output.strip() == (
        "app.jobs:d runs (not paused)"
    )


def test_schedule_and_runs_show_the_pause(tmp_path: Path) -> None:
    pytest.importorskip("firefly_scheduling_database")
    from firefly_scheduling_database.sql_history.store import SqlRunHistory  # noqa: PLC0415

    env, runner = _env(), CliRunner()
    target = "firefly_host_unit_app:heartbeat"
    history_url = f"sqlite:///{tmp_path / 'history.db'}"
    history = SqlRunHistory(history_url)
    instant = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)
    try:
        history.install()
        history.skip(target, instant, lock=target, node="n1", reason="paused", at=instant)
    finally:
        history.close()
    env["FIREFLY_SCHEDULING_HISTORY_URL"] = history_url
    assert runner.invoke(main, ["pause", target, "--by", "eve"], env=env).exit_code == 0
    listing = ["schedule", "--path", SUPPORT, "--app", "firefly_host_unit_app"]
    [row] = [
        json.loads(line)
        for line in runner.invoke(main, [*listing, "--json"], env=env).output.splitlines()
    ]
    assert (row["target"], row["paused"]) == (target, True)
    assert f"{target} is paused by eve" in runner.invoke(main, listing, env=env).output
    runs = runner.invoke(main, ["runs", "--json"], env=env)
    [fire] = [json.loads(line) for line in runs.output.splitlines()]
    assert (fire["state"], fire["reason"]) == ("skipped", "paused")
    assert f"{target} is paused by eve" in runner.invoke(main, ["runs"], env=env).output
