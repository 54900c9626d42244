"""`pause`, `resume` and `status` against a `memory://` control store, and their refusals."""

from __future__ import annotations

import json
import uuid

from click.testing import CliRunner

from firefly_scheduling.cli import main
from firefly_scheduling.control.memory import MemoryControlStore


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
