"""The host commands' boot refusals and the per-host schedule listing (click's runner)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from firefly_scheduling.cli import main

SUPPORT = str(Path(__file__).resolve().parent / "host_support")


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for variable in ("FIREFLY_SCAN_PACKAGES", "FIREFLY_SCHEDULING_LOCK_PROVIDER"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("FIREFLY_SCHEDULING_MANIFEST", str(tmp_path / "absent.json"))
    return CliRunner()


def test_schedule_describes_the_resident_host_by_default(runner: CliRunner) -> None:
    result = runner.invoke(main, ["schedule", "--path", SUPPORT, "--app", "firefly_host_unit_app"])
    assert result.exit_code == 0, result.output
    assert "firefly-scheduling run" in result.output
    assert "fixed rate 200ms" in result.output
    assert " UTC" in result.output  # the next fire, epoch-aligned


def test_schedule_for_tick_shows_the_cadence_bucket(runner: CliRunner) -> None:
    arguments = ["schedule", "--path", SUPPORT, "--app", "firefly_host_unit_app", "--host", "tick"]
    result = runner.invoke(main, arguments)
    assert result.exit_code == 0, result.output
    assert "firefly-scheduling tick" in result.output
    assert "every second" in result.output
    assert "fixed rate 200ms" not in result.output


@pytest.mark.parametrize("command", ["run", "tick"])
def test_an_unknown_lock_provider_exits_2_with_the_message(runner: CliRunner, command: str) -> None:
    arguments = [command, "--path", SUPPORT, "--app", "firefly_host_unit_app"]
    result = runner.invoke(main, [*arguments, "--lock-provider", "zookeeper"])
    assert result.exit_code == 2
    assert "unknown lock provider 'zookeeper'" in result.output


@pytest.mark.parametrize("command", ["run", "tick"])
def test_no_task_exits_2_saying_why(runner: CliRunner, command: str) -> None:
    result = runner.invoke(main, [command])
    assert result.exit_code == 2
    assert "no task found" in result.output


def test_a_disabled_initial_delay_gate_refuses_a_delayed_task(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIREFLY_SCHEDULING_INITIAL_DELAY_ENABLED", "false")
    result = runner.invoke(main, ["tick", "--app", "firefly_scheduling.demo_app"])
    assert result.exit_code == 2
    assert "firefly_scheduling.demo_app.tasks:warm_cache" in result.output


@pytest.mark.parametrize("command", ["run", "tick"])
@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_a_bad_max_workers_exits_2_naming_it(runner: CliRunner, command: str, value: str) -> None:
    arguments = [command, "--path", SUPPORT, "--app", "firefly_host_unit_app"]
    result = runner.invoke(main, [*arguments, "--max-workers", value])
    assert result.exit_code == 2
    assert "--max-workers" in result.output
    assert repr(value) in result.output or value in result.output
