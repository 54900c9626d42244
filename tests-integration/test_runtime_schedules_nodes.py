"""Runtime schedules on 2 real `firefly-scheduling run` nodes, on Redis and PostgreSQL.

The nodes keep their lock and control store on the backend's own server. The test
adds a schedule from the command line and witnesses its bodies from outside the
nodes: each body appends its node, its fire's instant and the kernel's clocks
(`CLOCK_REALTIME`, `CLOCK_MONOTONIC`) to an O_APPEND file. It checks that

* both nodes pick the schedule up within 5 s of `schedules add` returning: the
  first body starts by then, and each node logs that it added the schedule's job
  by then (its log's wall clock against the test's `CLOCK_REALTIME`), and likewise
  drop it within 5 s of `schedules remove`;
* each fire runs once across the fleet (no instant twice in the witness);
* no body starts later than 5 s after `schedules remove` returned;
* a target that is not `@schedulable` is refused by `schedules add` (exit 2, naming
  it), and a record of it written straight into the store by a second client is
  ignored by both nodes, with an ERROR naming it: its body never runs.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from firefly_hostapps.harness import HOST_APPS, STARTED, node_env, start_node

from firefly_scheduling.cli import main
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database.control_store import DatabaseControlStore
from firefly_scheduling_redis.control_store import RedisControlStore
from runtime_witness import (
    PICKUP_SECONDS,
    kernel_monotonic,
    kernel_realtime,
    logged_at,
    read_stamps,
)

pytestmark = pytest.mark.slow

APP = "firefly_hostapps.runtime_jobs"
#: How long the schedule runs before it is removed, in seconds.
RUN_SECONDS = 6.0


@pytest.mark.parametrize(
    ("provider", "url_fixture", "second_client"),
    [("redis", "redis_url", RedisControlStore), ("postgres", "postgres_url", DatabaseControlStore)],
)
def test_two_nodes_run_a_runtime_schedule_once_per_fire_and_stop_when_removed(
    provider: str,
    url_fixture: str,
    second_client: Callable[[str], Any],
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    url: str = request.getfixturevalue(url_fixture)
    witness, forbidden = tmp_path / "witness.log", tmp_path / "forbidden.log"
    backend = {
        "FIREFLY_SCHEDULING_LOCK_PROVIDER": provider,
        f"FIREFLY_SCHEDULING_LOCK_{provider.upper()}_URL": url,
    }
    env = node_env(
        tmp_path,
        FIREFLY_HOSTAPP_LOG=str(witness),
        FIREFLY_HOSTAPP_FORBIDDEN_LOG=str(forbidden),
        **backend,
    )
    name, sneaky = f"runtime-{uuid.uuid4().hex[:12]}", f"sneaky-{uuid.uuid4().hex[:12]}"
    store = second_client(url)
    nodes = [
        start_node("run", f"{provider}-node-{n}", app=APP, env=env, workdir=tmp_path)
        for n in (1, 2)
    ]
    cli = CliRunner()
    cli_env = {**backend, "FIREFLY_SCHEDULING_MANIFEST": str(tmp_path / "no-manifest.json")}
    source = ["--app", APP, "--path", str(HOST_APPS)]
    try:
        for node in nodes:
            assert node.wait_for_output(STARTED, timeout=60), node.text()

        refused = cli.invoke(
            main,
            ["schedules", "add", "x", f"{APP}:forbidden", "--fixed-rate", "1s", *source],
            env=cli_env,
        )
        assert refused.exit_code == 2, refused.output
        assert f"{APP}:forbidden' is not schedulable" in refused.output
        # Past the checks, as anyone who can write the store could.
        descriptor = ScheduledDescriptor(
            target=f"{APP}:forbidden", fixed_rate=1.0, lock_name=sneaky
        )
        assert store.add_schedule(sneaky, descriptor, by="a second client")

        adding = ["schedules", "add", name, f"{APP}:witness", "--fixed-rate", "1s", "--by", "ops"]
        added = cli.invoke(main, [*adding, *source], env=cli_env)
        added_at, added_wall = kernel_monotonic(), kernel_realtime()
        assert added.exit_code == 0, added.output
        assert [s.name for s in store.schedules() if s.name == name] == [name]

        deadline = added_at + PICKUP_SECONDS + RUN_SECONDS
        while kernel_monotonic() < deadline:
            time.sleep(0.2)
        removed = cli.invoke(main, ["schedules", "remove", name], env=cli_env)
        removed_at, removed_wall = kernel_monotonic(), kernel_realtime()
        assert removed.exit_code == 0, removed.output
        time.sleep(PICKUP_SECONDS + 2.0)
    finally:
        store.remove_schedule(sneaky)
        store.remove_schedule(name)
        store.close()
        codes = [node.stop() for node in nodes]
    outputs = "\n".join(f"--- {node.name}\n{node.text()[-3000:]}" for node in nodes)
    assert codes == [0, 0], outputs

    stamps = read_stamps(witness)
    assert stamps, outputs
    assert min(s.monotonic for s in stamps) <= added_at + PICKUP_SECONDS, outputs
    # Both nodes picked the schedule up (and so raced for its fires) within the bound.
    for node in nodes:
        picked_up = logged_at(node.text(), f"runtime schedule {name!r} added")
        assert picked_up is not None, outputs
        assert picked_up <= added_wall + PICKUP_SECONDS, outputs
        dropped = logged_at(node.text(), f"runtime schedule {name!r} removed")
        assert dropped is not None, outputs
        assert dropped <= removed_wall + PICKUP_SECONDS, outputs
    instants = [s.instant for s in stamps]
    assert len(instants) == len(set(instants)), f"a fire ran twice: {sorted(instants)}"
    assert len(stamps) >= RUN_SECONDS - 1, outputs  # a 1 s rate for over 6 s
    late = [s for s in stamps if s.monotonic > removed_at + PICKUP_SECONDS]
    assert late == [], outputs

    assert read_stamps(forbidden) == []
    for node in nodes:
        assert f"runtime schedule {sneaky!r} ignored" in node.text(), outputs
        assert f"{APP}:forbidden' is not schedulable" in node.text(), outputs
