"""The initial delay across real `tick` processes, each one a fresh process as under cron.

The delayed app's task is due every minute with a 15 s `initial_delay`. The first
tick process anchors the window; one starting 2 s after the anchor does not run the
task; one starting after the window does. Three stores run the sequence at once. The
window is long so that a process start-up on a loaded machine (the suite runs in
parallel workers) still falls inside it.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import Node, node_env, start_node

from firefly_scheduling.initial_delay import Anchor, AnchorStore, anchor_key
from firefly_scheduling_database.anchor_store import create_anchor_store as database_store
from firefly_scheduling_memcached.anchor_store import create_anchor_store as memcached_store
from firefly_scheduling_redis.anchor_store import create_anchor_store as redis_store

pytestmark = pytest.mark.slow

TARGET = "firefly_hostapps.delayed:warm_up"
#: Long enough for two process start-ups on a loaded machine to fall inside it.
DELAY = 15.0


def _tick(workdir: Path, env: dict[str, str], name: str, fires: Path) -> tuple[str, Node]:
    """Run one tick process to completion; the verdict it recorded for the task."""
    node = start_node(
        "tick",
        name,
        app="firefly_hostapps.delayed",
        env=env,
        workdir=workdir,
        args=("--fire-log", str(fires)),
    )
    assert node.wait(timeout=60) == 0, node.text()
    records = [json.loads(line) for line in fires.read_text().splitlines()]
    mine = [record for record in records if record["node"] == name]
    assert len(mine) == 1, node.text()
    return mine[0]["status"], node


def _sleep_until(instant: float) -> None:
    time.sleep(max(0.0, instant - time.time()))


def _anchor_time(store: AnchorStore) -> float:
    raw = store.get(anchor_key(TARGET))
    assert raw is not None
    anchor = Anchor.decode(raw)
    assert anchor is not None
    return anchor.observed_at


def _delayed_env(workdir: Path, release: str, **backend: str) -> dict[str, str]:
    """A node's environment for the delayed app, release `release`, on `backend`."""
    return node_env(
        workdir,
        FIREFLY_SCHEDULING_INITIAL_DELAY_RELEASE=release,
        FIREFLY_HOSTAPP_LOG=str(workdir / "runs.log"),
        FIREFLY_HOSTAPP_INITIAL_DELAY=str(DELAY),
        **backend,
    )


def _sequence(workdir: Path, store_url: str, factory: Callable[[], AnchorStore]) -> list[str]:
    """First tick anchors; +2 s after the anchor: held back; after the window: runs."""
    release = uuid.uuid4().hex  # a fresh window, whatever earlier runs left in the store
    env = _delayed_env(
        workdir,
        release,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="memory",
        FIREFLY_SCHEDULING_INITIAL_DELAY_STORE=store_url,
    )
    fires = workdir / "fires.jsonl"
    outcomes = [_tick(workdir, env, "first", fires)[0]]
    store = factory()
    try:
        anchored = _anchor_time(store)
    finally:
        store.close()
    _sleep_until(anchored + 2)
    outcomes.append(_tick(workdir, env, "second", fires)[0])
    _sleep_until(anchored + DELAY + 0.5)
    outcomes.append(_tick(workdir, env, "third", fires)[0])
    return outcomes


STORES = ("redis", "memcached", "database-postgres")


@pytest.fixture(scope="module")
def sequences(
    tmp_path_factory: pytest.TempPathFactory, redis_url: str, memcached_url: str, postgres_url: str
) -> dict[str, list[str]]:
    """The three-tick sequence on every store, the stores side by side to save time."""
    stores = {
        "redis": (redis_url, redis_store),
        "memcached": (memcached_url, memcached_store),
        "database-postgres": (postgres_url, database_store),
    }

    def run(kind: str) -> list[str]:
        url, factory = stores[kind]
        return _sequence(tmp_path_factory.mktemp(kind), url, partial(factory, url))

    with ThreadPoolExecutor(len(STORES)) as pool:
        return dict(zip(STORES, pool.map(run, STORES), strict=True))


@pytest.mark.parametrize("store_kind", STORES)
def test_the_window_is_measured_from_the_first_process_that_saw_the_task(
    sequences: dict[str, list[str]], store_kind: str
) -> None:
    assert sequences[store_kind] == ["held_back", "held_back", "succeeded"]


def test_a_new_release_re_arms_the_window_once(tmp_path: Path, redis_url: str) -> None:
    fires = tmp_path / "fires.jsonl"

    def env_for(release: str) -> dict[str, str]:
        return _delayed_env(
            tmp_path,
            release,
            FIREFLY_SCHEDULING_LOCK_PROVIDER="redis",
            FIREFLY_SCHEDULING_LOCK_REDIS_URL=redis_url,
        )

    old, new = f"old-{uuid.uuid4().hex}", f"new-{uuid.uuid4().hex}"
    first, _ = _tick(tmp_path, env_for(old), "old-1", fires)
    time.sleep(DELAY + 0.5)
    second, _ = _tick(tmp_path, env_for(old), "old-2", fires)
    third, rearming = _tick(tmp_path, env_for(new), "new-1", fires)
    fourth, following = _tick(tmp_path, env_for(new), "new-2", fires)
    assert [first, second, third, fourth] == ["held_back", "succeeded", "held_back", "held_back"]
    assert rearming.text().count("re-armed") == 1
    assert "re-armed" not in following.text()


def test_tick_warns_that_a_per_process_store_never_lets_a_delayed_task_run(
    tmp_path: Path,
) -> None:
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="none",
        FIREFLY_HOSTAPP_LOG=str(tmp_path / "runs.log"),
    )
    outcome, node = _tick(tmp_path, env, "tick", tmp_path / "fires.jsonl")
    assert outcome == "held_back"
    assert "will never run" in node.text()
    assert TARGET in node.text()


def test_run_with_a_per_process_store_does_not_warn(tmp_path: Path) -> None:
    env = node_env(tmp_path, FIREFLY_SCHEDULING_LOCK_PROVIDER="none")
    node = start_node("run", "resident", app="firefly_hostapps.delayed", env=env, workdir=tmp_path)
    assert node.wait_for_output("resident host started", timeout=30), node.text()
    assert node.stop() == 0
    assert "will never run" not in node.text()


def test_a_disabled_gate_with_a_delayed_task_refuses_to_boot(tmp_path: Path) -> None:
    env = node_env(tmp_path, FIREFLY_SCHEDULING_INITIAL_DELAY_ENABLED="false")
    node = start_node("tick", "tick", app="firefly_hostapps.delayed", env=env, workdir=tmp_path)
    assert node.wait(timeout=30) == 2
    assert "FIREFLY_SCHEDULING_INITIAL_DELAY_ENABLED=false" in node.text()
    assert TARGET in node.text()
