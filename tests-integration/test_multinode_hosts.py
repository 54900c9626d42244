"""Multi-node: 3 real `firefly-scheduling run` processes per backend race for one locked task.

For every backend with real exclusion (memory excluded), three node processes run
the resident host for over 12 s on an app whose locked task (`fixed_rate` 0.3 s, a
50-150 ms body) appends `(node, start, end)` to a shared log. No two runs may
overlap in time, and every node must have won the lock at least once. All backends
run at the same time, so the whole module takes under a minute (the start-up of
27 processes on two cores is most of it).

Who wins a fire is whoever claims it first, so on a loaded CI machine one node can
lose a long streak: about 40 fires per race (not 20) keep "every node won at least
once" from failing on a streak while still proving that the lock changes hands.
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import STARTED, Node, node_env, overlaps, read_runs, start_node

from backend_matrix import BACKENDS_WITH_CLUSTER, lock_env, server_urls

pytestmark = pytest.mark.slow

NODES = 3
#: Seconds of racing once every node has started.
RUN_SECONDS = 12.0
#: The race's fire period, in seconds (its body takes 50-150 ms).
FIRE_PERIOD = "0.3"


@dataclass
class Race:
    """The outcome of one backend's race."""

    log: Path
    nodes: list[Node]
    exit_codes: list[int]


@pytest.fixture(scope="module")
def races(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Race]:
    urls = server_urls(request, BACKENDS_WITH_CLUSTER)
    started: dict[str, tuple[Path, list[Node]]] = {}
    for backend in BACKENDS_WITH_CLUSTER:
        workdir = tmp_path_factory.mktemp(backend)
        log = workdir / "runs.log"
        env = node_env(
            workdir,
            FIREFLY_HOSTAPP_LOG=str(log),
            FIREFLY_HOSTAPP_LOCK=f"hostapps-race-{uuid.uuid4().hex}",
            FIREFLY_HOSTAPP_RATE=FIRE_PERIOD,
            # One history per race: the history identifies a fire by task and instant,
            # and these races run the same task at the same instants side by side, on
            # shared servers (a real fleet has one history per application).
            FIREFLY_SCHEDULING_HISTORY_URL=f"sqlite:///{workdir / 'history.db'}",
            **lock_env(backend, urls, workdir),
        )
        nodes = [
            start_node(
                "run",
                f"{backend}-node-{n}",
                app="firefly_hostapps.race",
                env=env,
                workdir=workdir,
                args=("--fire-log", str(workdir / "fires.jsonl")),
            )
            for n in range(1, NODES + 1)
        ]
        started[backend] = (log, nodes)
    for _, nodes in started.values():
        for node in nodes:
            node.wait_for_output(STARTED, timeout=60)
    time.sleep(RUN_SECONDS)
    for _, nodes in started.values():
        for node in nodes:
            node.terminate()
    return {
        backend: Race(log, nodes, [node.stop() for node in nodes])
        for backend, (log, nodes) in started.items()
    }


@pytest.mark.parametrize("backend", BACKENDS_WITH_CLUSTER)
def test_three_nodes_never_overlap_and_all_take_part(races: dict[str, Race], backend: str) -> None:
    race = races[backend]
    outputs = "\n".join(f"--- {node.name}\n{node.text()[-2000:]}" for node in race.nodes)
    assert race.exit_codes == [0] * NODES, outputs
    runs = read_runs(race.log)
    # 0.3 s fires for 12 s, minus start-up: well over twenty runs whoever wins.
    assert len(runs) >= 20, outputs
    assert overlaps(runs) == []
    winners = {run.node for run in runs}
    assert winners == {node.name for node in race.nodes}, f"runs per node: {winners}"
