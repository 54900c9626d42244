"""Runtime schedules under the asyncio host and `tick`, and in the listings, on Redis.

The schedule is written by a second client of the store, and the bodies are
witnessed from outside the host: each appends its node, its fire's instant and the
kernel's clocks to an O_APPEND file (`firefly_hostapps.runtime_jobs`).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from firefly_hostapps.harness import (
    HOST_APPS,
    STARTED,
    node_env,
    start_node,
    wait_for_early_minute,
)

from firefly_scheduling.cli import main
from firefly_scheduling.contrib.starlette import scheduled_tasks
from firefly_scheduling.control.runtime_schedules import add_runtime_schedule
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.discovery import runtime_targets
from firefly_scheduling_redis.control_store import RedisControlStore
from runtime_witness import PICKUP_SECONDS, kernel_monotonic, read_stamps

pytestmark = pytest.mark.slow

APP = "firefly_hostapps.runtime_jobs"


def test_the_asyncio_host_picks_up_a_runtime_schedule_and_drops_it_within_5_s(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    witness = tmp_path / "witness.log"
    monkeypatch.setenv("FIREFLY_HOSTAPP_LOG", str(witness))
    monkeypatch.syspath_prepend(str(HOST_APPS))
    settings = Settings(
        lock_provider="redis",
        lock_urls={"redis": redis_url},
        scan_packages=(APP,),
        manifest_path=tmp_path / "no-manifest.json",
        node="asyncio-node",
    )
    name = f"runtime-async-{uuid.uuid4().hex[:12]}"
    store = RedisControlStore(redis_url)

    async def scenario() -> tuple[float, float]:
        async with scheduled_tasks(settings=settings):
            allowed = runtime_targets(settings)
            await asyncio.to_thread(
                add_runtime_schedule,
                store,
                name,
                f"{APP}:witness",
                by="test",
                allowed=allowed,
                fixed_rate="500ms",
            )
            added_at = kernel_monotonic()
            while not read_stamps(witness) and kernel_monotonic() < added_at + 10:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)
            await asyncio.to_thread(store.remove_schedule, name)
            removed_at = kernel_monotonic()
            await asyncio.sleep(PICKUP_SECONDS + 1.5)
        return added_at, removed_at

    try:
        added_at, removed_at = asyncio.run(scenario())
    finally:
        store.remove_schedule(name)
        store.close()
    stamps = read_stamps(witness)
    assert stamps
    assert min(s.monotonic for s in stamps) <= added_at + PICKUP_SECONDS
    assert [s for s in stamps if s.monotonic > removed_at + PICKUP_SECONDS] == []
    instants = [s.instant for s in stamps]
    assert "-" not in instants  # each body ran inside its fire
    assert len(instants) == len(set(instants))


def test_tick_runs_the_runtime_schedules_it_reads_once_per_pass(
    redis_url: str, tmp_path: Path
) -> None:
    witness, forbidden = tmp_path / "witness.log", tmp_path / "forbidden.log"
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="redis",
        FIREFLY_SCHEDULING_LOCK_REDIS_URL=redis_url,
        FIREFLY_HOSTAPP_LOG=str(witness),
        FIREFLY_HOSTAPP_FORBIDDEN_LOG=str(forbidden),
        FIREFLY_SCHEDULING_HISTORY_URL=f"sqlite:///{tmp_path / 'history.db'}",
    )
    name, sneaky = f"runtime-tick-{uuid.uuid4().hex[:12]}", f"sneaky-{uuid.uuid4().hex[:12]}"
    paused = f"runtime-paused-{uuid.uuid4().hex[:12]}"
    store = RedisControlStore(redis_url)
    allowed = {f"{APP}:witness", f"{APP}:yearly"}
    cli_env = {key: value for key, value in env.items() if key.startswith("FIREFLY_SCHEDULING_")}
    try:
        for added in (name, paused):
            add_runtime_schedule(
                store, added, f"{APP}:witness", by="test", allowed=allowed, cron="* * * * *"
            )
        pausing = CliRunner().invoke(main, ["pause", paused, "--by", "test"], env=cli_env)
        assert pausing.exit_code == 0, pausing.output
        store.add_schedule(
            sneaky,
            ScheduledDescriptor(target=f"{APP}:forbidden", cron="* * * * *", lock_name=sneaky),
            by="a second client",
        )
        wait_for_early_minute()
        node = start_node("tick", "tick-node", app=APP, env=env, workdir=tmp_path, args=("--json",))
        status = node.wait(timeout=60)
    finally:
        store.resume(paused)
        for removed in (name, paused, sneaky):
            store.remove_schedule(removed)
        store.close()
    output = node.text()
    assert status == 0, output
    rows = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    ran = [row for row in rows if row["target"] == name]
    assert [(row["verdict"], row["trigger"]) for row in ran] == [("succeeded", "runtime")], output
    held = [(row["verdict"], row["trigger"]) for row in rows if row["target"] == paused]
    assert held == [("paused", "runtime")], output  # paused by its name: its body never ran
    assert len(read_stamps(witness)) == 1
    assert read_stamps(forbidden) == []
    assert f"runtime schedule {sneaky!r} ignored" in output
    # The run history keeps the fire under the schedule's name, made by the runtime schedule.
    history = CliRunner().invoke(main, ["runs", "--task", name, "--json"], env=cli_env)
    assert history.exit_code == 0, history.output
    records = [json.loads(line) for line in history.output.splitlines()]
    assert [(r["target"], r["state"], r["trigger"]) for r in records] == [
        (name, "succeeded", "runtime")
    ], history.output


def test_the_listings_show_runtime_schedules_and_which_the_nodes_ignore(
    redis_url: str, tmp_path: Path
) -> None:
    env = {
        "FIREFLY_SCHEDULING_LOCK_PROVIDER": "redis",
        "FIREFLY_SCHEDULING_LOCK_REDIS_URL": redis_url,
        "FIREFLY_SCHEDULING_MANIFEST": str(tmp_path / "no-manifest.json"),
    }
    source = ["--app", APP, "--path", str(HOST_APPS)]
    name, sneaky = f"runtime-list-{uuid.uuid4().hex[:12]}", f"sneaky-{uuid.uuid4().hex[:12]}"
    cli = CliRunner()
    store = RedisControlStore(redis_url)
    try:
        adding = ["schedules", "add", name, f"{APP}:witness", "--cron", "*/5 * * * *", *source]
        added = cli.invoke(main, [*adding, "--json"], env=env)
        assert added.exit_code == 0, added.output
        assert json.loads(added.output)["added"] is True
        again = cli.invoke(main, adding, env=env)
        assert again.exit_code == 0, again.output
        assert "already exists" in again.output
        conflict = cli.invoke(
            main,
            ["schedules", "add", name, f"{APP}:witness", "--cron", "* * * * *", *source],
            env=env,
        )
        assert conflict.exit_code == 1, conflict.output
        store.add_schedule(
            sneaky,
            ScheduledDescriptor(target=f"{APP}:forbidden", cron="* * * * *", lock_name=sneaky),
            by="a second client",
        )
        listed = cli.invoke(main, ["schedules", "list", "--json", *source], env=env)
        assert listed.exit_code == 0, listed.output
        rows = {row["name"]: row for row in map(json.loads, listed.output.splitlines())}
        assert rows[name]["runs"] is True
        assert rows[name]["target"] == f"{APP}:witness"
        assert rows[name]["arguments"]["cron"] == "*/5 * * * *"
        assert rows[sneaky]["runs"] is False
        assert "is not schedulable" in rows[sneaky]["refused"]
        schedule = cli.invoke(main, ["schedule", "--json", *source], env=env)
        assert schedule.exit_code == 0, schedule.output
        tasks = {row["target"]: row for row in map(json.loads, schedule.output.splitlines())}
        assert tasks[name]["runtime"] is True
        assert tasks[name]["runs"] == f"{APP}:witness"
        assert tasks[name]["lock"] == name
        assert tasks[f"{APP}:yearly"]["runtime"] is False
        assert sneaky not in tasks
        removed = cli.invoke(main, ["schedules", "remove", name], env=env)
        assert removed.output.strip() == f"runtime schedule {name!r} removed"
        assert name not in {s.name for s in store.schedules()}
    finally:
        store.remove_schedule(name)
        store.remove_schedule(sneaky)
        store.close()


def test_without_a_durable_control_store_tick_runs_and_says_so_once(
    memcached_url: str, tmp_path: Path
) -> None:
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="memcached",
        FIREFLY_SCHEDULING_LOCK_MEMCACHED_URL=memcached_url,
    )
    node = start_node("tick", "tick-memcached", app=APP, env=env, workdir=tmp_path)
    assert node.wait(timeout=60) == 0, node.text()
    warnings = [
        line for line in node.text().splitlines() if "needs a durable control store" in line
    ]
    assert len(warnings) == 1, node.text()
    assert "FIREFLY_SCHEDULING_CONTROL_URL" in warnings[0]
    listed = CliRunner().invoke(
        main,
        ["schedules", "list", "--app", APP, "--path", str(HOST_APPS)],
        env={key: value for key, value in env.items() if key.startswith("FIREFLY_SCHEDULING_")},
    )
    assert listed.exit_code == 2, listed.output
    assert "FIREFLY_SCHEDULING_CONTROL_URL" in listed.output


def test_a_node_with_only_schedulable_callables_boots_and_runs_runtime_schedules(
    redis_url: str, tmp_path: Path
) -> None:
    witness = tmp_path / "witness.log"
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="redis",
        FIREFLY_SCHEDULING_LOCK_REDIS_URL=redis_url,
        FIREFLY_HOSTAPP_LOG=str(witness),
    )
    app = "firefly_hostapps.runtime_only"
    name = f"runtime-only-{uuid.uuid4().hex[:12]}"
    store = RedisControlStore(redis_url)
    node = start_node("run", "runtime-only-node", app=app, env=env, workdir=tmp_path)
    try:
        assert node.wait_for_output(STARTED, timeout=60), node.text()
        add_runtime_schedule(
            store, name, f"{app}:only", by="test", allowed={f"{app}:only"}, fixed_rate="500ms"
        )
        added_at = kernel_monotonic()
        while not read_stamps(witness) and kernel_monotonic() < added_at + 10:
            time.sleep(0.05)
    finally:
        store.remove_schedule(name)
        store.close()
        status = node.stop()
    assert status == 0, node.text()
    stamps = read_stamps(witness)
    assert stamps, node.text()
    assert min(s.monotonic for s in stamps) <= added_at + PICKUP_SECONDS
    assert "this node runs the runtime schedules only" in node.text()


def test_a_node_with_only_schedulable_callables_and_no_control_store_is_refused(
    tmp_path: Path,
) -> None:
    env = node_env(tmp_path, FIREFLY_SCHEDULING_LOCK_PROVIDER="memory")
    node = start_node(
        "run", "refused-node", app="firefly_hostapps.runtime_only", env=env, workdir=tmp_path
    )
    assert node.wait(timeout=60) == 2, node.text()
    assert "run only on runtime schedules" in node.text()
    assert "FIREFLY_SCHEDULING_CONTROL_URL" in node.text()
