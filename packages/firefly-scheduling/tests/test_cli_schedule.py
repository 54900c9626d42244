"""The CLI's `schedule` and `cache` commands, and plugin commands from entry points."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from firefly_scheduling import ScheduledDescriptor, ScheduledManifest, Settings
from firefly_scheduling.cli import main
from firefly_scheduling.cli.common import FireflyGroup
from firefly_scheduling.initial_delay import InitialDelayGate
from firefly_scheduling.initial_delay.selection import resolve_anchor_store

DEMO_APP = "firefly_scheduling.demo_app"
DEMO_TARGETS = [
    "firefly_scheduling.demo_app.tasks:Reports.weekly_digest",
    "firefly_scheduling.demo_app.tasks:heartbeat",
    "firefly_scheduling.demo_app.tasks:minute_report",
    "firefly_scheduling.demo_app.tasks:tidy_up",
    "firefly_scheduling.demo_app.tasks:warm_cache",
]


pytestmark = pytest.mark.usefixtures("isolated")


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "200", **(env or {})})


def test_schedule_lists_the_demo_app() -> None:
    result = invoke("schedule", "--app", DEMO_APP)
    assert result.exit_code == 0, result.output
    for target in DEMO_TARGETS:
        assert target in result.output
    assert "5 tasks from a scan of firefly_scheduling.demo_app" in result.output
    for shown in (
        "fixed rate 1s",
        "fixed delay 5s",
        "0 3 * * 0",
        "America/New_York",
        "Europe/Paris",
        "= target, ttl 5s",
        "example-minute-report, ttl 30s",
        "= target, ttl 10m",
    ):
        assert shown in result.output


def test_schedule_under_tick_shows_cadence_buckets() -> None:
    result = invoke("schedule", "--app", DEMO_APP, "--host", "tick")
    assert result.exit_code == 0, result.output
    assert "every 10 seconds" in result.output
    assert "every second" in result.output
    assert "* * * * *" in result.output


def test_schedule_reads_the_packages_from_the_environment() -> None:
    result = invoke("schedule", env={"FIREFLY_SCAN_PACKAGES": DEMO_APP})
    assert result.exit_code == 0, result.output
    assert "(from FIREFLY_SCAN_PACKAGES)" in result.output
    assert "firefly_scheduling.demo_app.tasks:heartbeat" in result.output


def test_schedule_says_why_nothing_was_found(isolated: Path) -> None:
    result = invoke("schedule")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "no task found: FIREFLY_SCAN_PACKAGES is not set" in text
    assert "no manifest at .firefly/scheduled.json" in text


def test_schedule_with_a_missing_explicit_manifest_exits_2(isolated: Path) -> None:
    result = invoke("schedule", "--manifest", str(isolated / "absent.json"))
    assert result.exit_code == 2
    assert f"Error: no manifest at {isolated / 'absent.json'}" in result.output


def test_configuration_errors_exit_2_without_a_traceback(isolated: Path) -> None:
    (isolated / "brokenapp").mkdir()
    (isolated / "brokenapp" / "__init__.py").write_text(
        "from firefly_scheduling import scheduled\n\n"
        "@scheduled(cron='* * * *')\ndef task():\n    pass\n"
    )
    result = invoke("schedule", "--path", str(isolated), "--app", "brokenapp")
    assert result.exit_code == 2
    assert "Error: scanning for @scheduled tasks: importing module 'brokenapp' failed" in (
        result.output
    )
    assert "brokenapp:task: cron '* * * *' has 4 fields" in result.output
    assert "Traceback" not in result.output
    sys.modules.pop("brokenapp", None)


def test_cache_compiles_then_check_passes_and_schedule_uses_it(isolated: Path) -> None:
    env = {"FIREFLY_SCAN_PACKAGES": DEMO_APP}
    compiled = invoke("cache", env=env)
    assert compiled.exit_code == 0, compiled.output
    assert (
        "wrote 5 task(s) from firefly_scheduling.demo_app to .firefly/scheduled.json"
        in compiled.output
    )
    manifest = ScheduledManifest.load(isolated / ".firefly" / "scheduled.json")
    assert [d.target for d in manifest.descriptors] == DEMO_TARGETS

    checked = invoke("cache", "--check", env=env)
    assert checked.exit_code == 0, checked.output
    assert "is up to date (5 task(s))" in checked.output

    # Without FIREFLY_SCAN_PACKAGES, --check compares with the packages the manifest names.
    checked_alone = invoke("cache", "--check")
    assert checked_alone.exit_code == 0, checked_alone.output

    listed = invoke("schedule", env=env)
    assert listed.exit_code == 0, listed.output
    assert "5 tasks from the compiled manifest .firefly/scheduled.json" in listed.output


def test_cache_check_exits_1_when_missing(isolated: Path) -> None:
    result = invoke("cache", "--check", "--app", DEMO_APP)
    assert result.exit_code == 1
    assert "no manifest at .firefly/scheduled.json" in result.output


def test_cache_check_exits_1_when_stale(isolated: Path) -> None:
    path = isolated / "custom.json"
    stale = [
        ScheduledDescriptor(target="firefly_scheduling.demo_app.tasks:heartbeat", fixed_rate=2.0)
    ]
    ScheduledManifest.compile(stale, path, packages=[DEMO_APP])
    result = invoke(
        "cache",
        "--check",
        "--manifest",
        str(path),
        "--app",
        DEMO_APP,
    )
    assert result.exit_code == 1
    assert "is stale" in result.output
    assert "changed: firefly_scheduling.demo_app.tasks:heartbeat" in result.output
    assert "added:" in result.output


def test_cache_check_exits_1_when_compiled_from_other_packages(isolated: Path) -> None:
    path = isolated / "custom.json"
    ScheduledManifest.compile([], path, packages=["another_app"])
    result = invoke(
        "cache",
        "--check",
        "--manifest",
        str(path),
        "--app",
        DEMO_APP,
    )
    assert result.exit_code == 1
    assert "was compiled from another_app, not firefly_scheduling.demo_app" in result.output


def test_cache_check_exits_1_for_an_unreadable_manifest(isolated: Path) -> None:
    path = isolated / "custom.json"
    path.write_text('{"format": "firefly-scheduling-manifest", "version": 99, "tasks": []}')
    result = invoke("cache", "--check", "--manifest", str(path), "--app", DEMO_APP)
    assert result.exit_code == 1
    assert "unknown version 99" in result.output


def test_cache_without_packages_exits_2() -> None:
    result = invoke("cache")
    assert result.exit_code == 2
    assert "nothing to scan: set FIREFLY_SCAN_PACKAGES or pass --app PACKAGE" in result.output


def test_the_main_group_lists_its_commands() -> None:
    result = invoke("--help")
    assert result.exit_code == 0, result.output
    for command in ("schedule", "cache"):
        assert command in result.output


# -- plugin commands through an entry-point group ------------------------------------------

TEST_GROUP = "firefly_scheduling.test_cli_commands"


@pytest.fixture
def plugin_group(isolated: Path) -> Iterator[FireflyGroup]:
    """A real installed distribution (a dist-info on sys.path) declaring two commands."""
    dist_info = isolated / "fireflyplugin_demo-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fireflyplugin-demo\nVersion: 1.0\n"
    )
    (dist_info / "entry_points.txt").write_text(
        f"[{TEST_GROUP}]\n"
        "hello = fireflyplugin_commands:hello\n"
        "broken = fireflyplugin_missing_module:command\n"
        "notacommand = fireflyplugin_commands:NOT_A_COMMAND\n"
        "schedule = fireflyplugin_commands:hello\n"
    )
    (isolated / "fireflyplugin_commands.py").write_text(
        textwrap.dedent(
            """
            import click

            NOT_A_COMMAND = 42

            @click.command()
            def hello():
                \"\"\"Say hello.\"\"\"
                click.echo("hello from the plugin")
            """
        )
    )
    sys.path.insert(0, str(isolated))

    @click.group(cls=FireflyGroup, plugin_group=TEST_GROUP)
    def group() -> None:
        """A test group."""

    @group.command()
    def schedule() -> None:
        click.echo("built-in schedule")

    assert isinstance(group, FireflyGroup)
    yield group
    sys.modules.pop("fireflyplugin_commands", None)


def test_plugin_commands_are_found_and_run(plugin_group: FireflyGroup) -> None:
    result = CliRunner().invoke(plugin_group, ["hello"])
    assert result.exit_code == 0, result.output
    assert result.output == "hello from the plugin\n"


def test_a_built_in_command_wins_over_a_plugin_of_the_same_name(
    plugin_group: FireflyGroup,
) -> None:
    assert CliRunner().invoke(plugin_group, ["schedule"]).output == "built-in schedule\n"


def test_broken_plugins_keep_help_working_and_exit_2_when_invoked(
    plugin_group: FireflyGroup,
) -> None:
    listing = CliRunner().invoke(plugin_group, ["--help"])
    assert listing.exit_code == 0, listing.output
    for name in ("hello", "broken", "notacommand", "schedule"):
        assert name in listing.output
    broken = CliRunner().invoke(plugin_group, ["broken"])
    assert broken.exit_code == 2
    assert "the command 'broken' from fireflyplugin-demo cannot be loaded" in broken.output
    assert "ModuleNotFoundError" in broken.output
    wrong = CliRunner().invoke(plugin_group, ["notacommand"])
    assert wrong.exit_code == 2
    assert "is not a click command" in wrong.output


def test_schedule_shows_when_a_delayed_task_may_first_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before its first sighting the delay counts from it; after, the listing names the time."""
    store_url = f"sqlite:///{tmp_path / 'anchors.db'}"
    monkeypatch.setenv("FIREFLY_SCHEDULING_INITIAL_DELAY_STORE", store_url)
    monkeypatch.delenv("FIREFLY_SCAN_PACKAGES", raising=False)
    manifest = tmp_path / "scheduled.json"
    delayed = ScheduledDescriptor(
        target="app.jobs:warm_cache",
        fixed_rate=10.0,
        initial_delay=3600.0,
        lock_name="app.jobs:warm_cache",
        lock_ttl=30.0,
    )
    ScheduledManifest.compile([delayed], manifest)
    arguments = ["schedule", "--manifest", str(manifest), "--json"]
    before = json.loads(CliRunner().invoke(main, arguments).output)
    assert before["first_run_from"] is None
    table = CliRunner().invoke(main, ["schedule", "--manifest", str(manifest)])
    assert "after the task is first seen" in table.output
    gate = InitialDelayGate(resolve_anchor_store(Settings(initial_delay_store=store_url)))
    assert not gate.admit(delayed)  # a host saw it now: the window is anchored
    gate.close()
    after = json.loads(CliRunner().invoke(main, arguments).output)
    first_run = datetime.fromisoformat(str(after["first_run_from"]))
    expected = datetime.now(UTC) + timedelta(hours=1)
    assert abs((first_run - expected).total_seconds()) < 60
    listed = CliRunner().invoke(main, ["schedule", "--manifest", str(manifest)])
    assert f"first run from {first_run:%Y-%m-%d %H:%M}" in listed.output
