"""Cron skew: 3 node processes with clocks at -2 s, 0 and +2 s run each cron fire exactly once.

For every backend with real exclusion, three OS processes (this file run as a
script) run a locked `* * * * *` task through `FireRunner`. Each node's wall clock
comes through the runner's clock seam, offset by -2 s, 0 or +2 s; each node wakes
when ITS clock reaches the next minute, names the fire with the hosts'
`cron_fire_at_or_before` (the matched minute) and runs a 1 ms body. So the three
nodes try one fire 2 s apart in real time, long after the first run ended: a
released plain lock would let all three run it.

Two paces, raced at the same time on every backend:

* `fast`: minutes pass in 10 real seconds (`MinuteClock`). Around each minute the
  clock runs at real speed, so the nodes meet the fire exactly as they would at real
  pace; the idle 50 s between fires are skipped, identically on every node. 3 fires
  (consecutive minutes, each a new claim name; more would only add CI time).
* `real`: the clock runs at real speed (only shifted so the first minute is seconds
  away), through one fire: the consecutive minutes are the fast pace's, so a second
  real minute would only add a minute of waiting to CI.

Each run appends `<instant> <node>` to a witness file. Every fire must appear there
exactly once (no duplicates, no misses beyond fires recorded as skipped), every
other attempt must have found it claimed, and the run history must hold one
succeeded first attempt per fire. The module takes 80 to 90 s (48 node processes boot).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from firefly_scheduling.fires.outcome import Fire

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_matrix import BACKENDS, install_tables, server_urls
from firefly_scheduling.fires.outcome import Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import RunRecord, RunState, resolve_history
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling.schedule.cron import CronSchedule
from firefly_scheduling.schedule.fire_instants import cron_fire_at_or_before
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from test_fire_claims_skew import DONE, READY, drive_races, launch_node, plain, settings_for

pytestmark = pytest.mark.slow

OFFSETS = (-2.0, 0.0, 2.0)
CRON = "* * * * *"
#: pace -> (real seconds per minute, fires)
PACES = {"fast": (10.0, 3), "real": (60.0, 1)}
#: Seconds of each node's clock before the first minute when the race starts: more
#: than the largest offset, so the fastest node does not start past its first fire.
LEAD_SECONDS = 5.0
#: Real seconds from "every node is ready" to the start of the race.
START_SECONDS = 2.0


@dataclass
class MinuteClock:
    """A node's wall clock on which each minute passes in `segment` real seconds.

    Real time `real_origin` reads `first_minute - lead` (+ `offset`). From there, the
    m-th `segment` of real seconds shows the `lead` seconds before minute m and the
    `segment - lead` seconds after it, at real speed; then the clock jumps to `lead`
    seconds before the next minute. Every node computes the same mapping, so the jumps
    happen at the same real instants everywhere. With `segment = 60` there is no jump:
    the clock is the real one, shifted.
    """

    real_origin: float
    first_minute: float
    segment: float
    lead: float
    offset: float

    def now(self) -> datetime:
        elapsed = time.time() - self.real_origin
        minutes, within = divmod(elapsed, self.segment) if elapsed >= 0 else (0.0, elapsed)
        shown = self.first_minute - self.lead + 60.0 * minutes + within + self.offset
        return datetime.fromtimestamp(shown, UTC)

    def real_time_of_minute(self, minute: int) -> float:
        """The real Unix time at which this clock reaches the start of minute `minute`."""
        return self.real_origin + minute * self.segment + self.lead - self.offset


# -- the node process -------------------------------------------------------------------


def node_main(config: dict[str, object]) -> None:
    """Run the fires of one cron task as one node; print one JSON line per outcome."""
    settings = Settings(**config["settings"])  # type: ignore[arg-type]
    clock = MinuteClock(**config["clock"])  # type: ignore[arg-type]
    target = str(config["target"])
    fires = int(config["fires"])  # type: ignore[call-overload]
    descriptor = ScheduledDescriptor(target=target, cron=CRON, lock_name=target, lock_ttl=30)
    schedule = CronSchedule.parse(CRON, None, source=target)
    witness = os.open(str(config["witness"]), os.O_WRONLY | os.O_APPEND)
    lock = resolve_lock(settings)
    runner = FireRunner.from_settings(lock, settings, clock=clock.now)
    # Start-up done; the parent starts the race once every node is ready.
    print(READY, flush=True)
    clock.real_origin = float(sys.stdin.readline())
    try:
        for minute in range(fires):
            time.sleep(max(0.0, clock.real_time_of_minute(minute) - time.time()))
            woke = time.time()
            instant = cron_fire_at_or_before(schedule, clock.now())

            def body(instant: datetime = instant) -> None:
                os.write(witness, f"{instant.isoformat()} {settings.node}\n".encode())
                time.sleep(0.001)

            outcome = runner.run(Fire.at(descriptor, instant), body)
            line = {"instant": instant.isoformat(), "status": outcome.verdict.value, "woke": woke}
            print(json.dumps(line), flush=True)
        print(DONE, flush=True)
        sys.stdin.readline()  # until the parent says every node is done
    finally:
        runner.close()
        getattr(lock, "close", lambda: None)()
        os.close(witness)


# -- the race ------------------------------------------------------------------------


@dataclass
class Race:
    target: str
    settings: Settings
    witness: Path
    instants: list[str]
    outcomes: list[tuple[str, str]]  # (instant, status) from every node
    exit_codes: list[int]
    woke: dict[str, list[float]] = field(default_factory=dict)  # instant -> real wake-ups


@pytest.fixture(scope="module")
def races(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], Race]:
    urls = server_urls(request, BACKENDS)
    # The first minute every node's clock reaches: a minute of the fake timeline.
    first_minute = 60.0 * math.ceil(time.time() / 60.0) + 60.0
    launched: dict[tuple[str, str], tuple[Race, list[subprocess.Popen[str]]]] = {}
    for pace, (segment, fires) in PACES.items():
        for backend in BACKENDS:
            workdir = tmp_path_factory.mktemp(f"{pace}-{backend}")
            target = f"cron_skew_{pace}_{backend.replace('-', '_')}_{uuid.uuid4().hex[:8]}:tick"
            witness = workdir / "witness.log"
            witness.touch()
            base = settings_for(backend, urls, workdir, "parent")
            install_tables(backend, urls, workdir)
            instants = [
                datetime.fromtimestamp(first_minute + 60 * k, UTC).isoformat() for k in range(fires)
            ]
            processes = []
            for index, offset in enumerate(OFFSETS):
                node = settings_for(backend, urls, workdir, f"node{index}{offset:+.0f}s")
                clock = MinuteClock(0.0, first_minute, segment, LEAD_SECONDS, offset)
                config = {
                    "settings": plain(node),
                    "clock": asdict(clock),
                    "target": target,
                    "fires": fires,
                    "witness": str(witness),
                }
                processes.append(launch_node(__file__, config))
            race = Race(target, base, witness, instants, [], [])
            launched[(pace, backend)] = (race, processes)

    def record(race: Race, line: dict[str, Any]) -> None:
        race.outcomes.append((line["instant"], line["status"]))
        race.woke.setdefault(line["instant"], []).append(line["woke"])

    drive_races(launched, lambda: str(time.time() + START_SECONDS), record)
    return {key: race for key, (race, _) in launched.items()}


@pytest.mark.parametrize("pace", sorted(PACES))
@pytest.mark.parametrize("backend", BACKENDS)
class TestSkewedCronNodes:
    def test_every_node_finished_cleanly(
        self, races: dict[tuple[str, str], Race], backend: str, pace: str
    ) -> None:
        assert races[(pace, backend)].exit_codes == [0, 0, 0]

    def test_the_nodes_tried_each_fire_seconds_apart(
        self, races: dict[tuple[str, str], Race], backend: str, pace: str
    ) -> None:
        """The skew is real: the slowest node woke 4 s after the fastest, at every fire."""
        race = races[(pace, backend)]
        spreads = {instant: max(woke) - min(woke) for instant, woke in race.woke.items()}
        assert sorted(spreads) == race.instants
        assert all(3.5 < spread < 5.0 for spread in spreads.values()), spreads

    def test_each_fire_ran_exactly_once(
        self, races: dict[tuple[str, str], Race], backend: str, pace: str
    ) -> None:
        race = races[(pace, backend)]
        runs = Counter(line.split()[0] for line in race.witness.read_text().splitlines())
        assert {instant: n for instant, n in runs.items() if n > 1} == {}
        skipped = {r.instant.isoformat() for r in _records(race) if r.state is RunState.SKIPPED}
        assert set(race.instants) - set(runs) - skipped == set()
        assert sorted(runs) == race.instants  # nothing was skipped either, with a 1 ms body

    def test_every_other_attempt_found_the_fire_claimed(
        self, races: dict[tuple[str, str], Race], backend: str, pace: str
    ) -> None:
        race = races[(pace, backend)]
        by_instant: dict[str, Counter[str]] = {}
        for instant, status in race.outcomes:
            by_instant.setdefault(instant, Counter())[status] += 1
        expected = Counter({Verdict.SUCCEEDED.value: 1, Verdict.CLAIMED_ELSEWHERE.value: 2})
        assert by_instant == dict.fromkeys(race.instants, expected)

    def test_the_history_holds_one_first_attempt_per_fire(
        self, races: dict[tuple[str, str], Race], backend: str, pace: str
    ) -> None:
        race = races[(pace, backend)]
        records = _records(race)
        assert sorted(r.instant.isoformat() for r in records) == race.instants
        assert {(r.state, r.attempt) for r in records} == {(RunState.SUCCEEDED, 1)}


def _records(race: Race) -> list[RunRecord]:
    history = resolve_history(race.settings)
    assert history is not None
    try:
        return history.runs(race.target, limit=100)
    finally:
        history.close()


if __name__ == "__main__":
    node_main(json.loads(sys.argv[1]))
