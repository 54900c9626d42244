"""Skew: 3 node processes with clocks at -2 s, 0 and +2 s run each fire exactly once.

For every backend with real exclusion, three OS processes (this file run as a
script) act as nodes. Each node's wall clock is offset through the runner's clock
seam (real clocks cannot be moved here); each wakes when ITS clock reaches the next
whole second, names the fire with the hosts' epoch-aligned `rate_fire_at_or_before`,
and calls `FireRunner.run` for a locked `fixed_rate='1s'` task with a 1 ms body, 20
times. So for one fire, the three nodes try 2 s apart in real time, long after the
first run ended: a released plain lock would let all three run it.

Each run appends `<instant> <node>` to a shared witness file. Every fire must appear
there exactly once (no duplicates, and no misses beyond fires recorded as skipped),
and the run history (the lock's own database where it has one, a shared SQLite file
otherwise) must hold one succeeded first attempt per fire. All backends race at the
same time, so the module takes about 50 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest

from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import RunRecord, RunState, resolve_history
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling.schedule.fire_instants import rate_fire_at_or_before, rate_step
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_matrix import (
    BACKENDS,
    SESSION_BACKENDS,
    install_tables,
    lock_settings,
    server_urls,
)

pytestmark = pytest.mark.slow

OFFSETS = (-2.0, 0.0, 2.0)
FIRES = 20
#: Seconds from "every node is ready" to the first fire.
LEAD_SECONDS = 3
READY = "ready"
DONE = "done"


def settings_for(backend: str, urls: dict[str, str], workdir: Path, node: str) -> Settings:
    """The node's settings: the backend's lock, and the history where it has one."""
    own_history = backend in SESSION_BACKENDS or backend.startswith("database-")
    history = "" if own_history else f"sqlite:///{workdir / 'history.db'}"
    return lock_settings(backend, urls, workdir, node, history)


# -- the node process -------------------------------------------------------------------


def node_main(config: dict[str, object]) -> None:
    """Run FIRES fires of one task as one node; print one JSON line per outcome."""
    settings = Settings(**config["settings"])  # type: ignore[arg-type]
    offset = timedelta(seconds=float(config["offset"]))  # type: ignore[arg-type]

    def clock() -> datetime:
        return datetime.now(UTC) + offset

    target = str(config["target"])
    descriptor = ScheduledDescriptor(target=target, fixed_rate=1.0, lock_name=target, lock_ttl=30)
    witness = os.open(str(config["witness"]), os.O_WRONLY | os.O_APPEND)
    lock = resolve_lock(settings)
    runner = FireRunner.from_settings(lock, settings, clock=clock)
    # Start-up done; the parent names the first fire once every node is ready.
    print(READY, flush=True)
    first = datetime.fromtimestamp(float(sys.stdin.readline()), UTC)
    step = rate_step(1.0)
    try:
        for k in range(FIRES):
            time.sleep(max(0.0, (first + k * step - clock()).total_seconds()))
            instant = rate_fire_at_or_before(step, clock())

            def body(instant: datetime = instant) -> None:
                os.write(witness, f"{instant.isoformat()} {settings.node}\n".encode())
                time.sleep(0.001)

            outcome = runner.run(Fire.at(descriptor, instant), body)
            line = {"instant": instant.isoformat(), "status": outcome.verdict.value}
            print(json.dumps(line), flush=True)
        print(DONE, flush=True)
        sys.stdin.readline()  # until the parent says every node is done
    finally:
        runner.close()
        close = getattr(lock, "close", None)
        if callable(close):
            close()
        os.close(witness)


# -- driving node processes (shared with the cron skew test) ------------------------------


def plain(settings: Settings) -> dict[str, object]:
    """`settings` as JSON fields for a node process (`Settings(**fields)`)."""
    fields = dict(vars(settings))
    fields.pop("manifest_path")
    return fields


def launch_node(script: str, config: dict[str, object]) -> subprocess.Popen[str]:
    """Run `script` as a node with `config`, talking over its stdin and stdout."""
    return subprocess.Popen(
        [sys.executable, script, json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


class _Raced(Protocol):
    exit_codes: list[int]


R = TypeVar("R", bound=_Raced)


def drive_races(
    launched: Mapping[Any, tuple[R, list[subprocess.Popen[str]]]],
    start: Callable[[], str],
    record: Callable[[R, dict[str, Any]], None],
) -> None:
    """Start every race at once and read it to the end.

    Waits until every node is ready, sends each the line `start()` returns (then, so a
    start time is counted from the moment all are ready), hands each JSON line a node
    prints to `record` until the node is done, then (every node stays up, holding its
    claims, until all are done) lets all exit, each race's exit codes in `exit_codes`.
    """
    for _, processes in launched.values():
        for process in processes:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == READY  # bounded by pytest's timeout
    line = start()
    for _, processes in launched.values():
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(f"{line}\n")
            process.stdin.flush()
    for race, processes in launched.values():
        for process in processes:
            assert process.stdout is not None
            for line in iter(process.stdout.readline, ""):
                if line.strip() == DONE:
                    break
                record(race, json.loads(line))
    for race, processes in launched.values():
        for process in processes:
            assert process.stdin is not None
            process.stdin.close()
            try:
                race.exit_codes.append(process.wait(timeout=30))
            except subprocess.TimeoutExpired:
                process.kill()
                race.exit_codes.append(process.wait())


# -- the race ------------------------------------------------------------------------


@dataclass
class Race:
    target: str
    settings: Settings
    witness: Path
    outcomes: list[tuple[str, str]]  # (instant, status) from every node
    exit_codes: list[int]
    instants: list[str]


@pytest.fixture(scope="module")
def races(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Race]:
    urls = server_urls(request, BACKENDS)
    launched: dict[str, tuple[Race, list[subprocess.Popen[str]]]] = {}
    for backend in BACKENDS:
        workdir = tmp_path_factory.mktemp(backend)
        target = f"skew_{backend.replace('-', '_')}_{uuid.uuid4().hex[:8]}:tick"
        witness = workdir / "witness.log"
        witness.touch()
        base = settings_for(backend, urls, workdir, "parent")
        install_tables(backend, urls, workdir)
        processes = []
        for index, offset in enumerate(OFFSETS):
            node_settings = settings_for(backend, urls, workdir, f"node{index}{offset:+.0f}s")
            config = {
                "settings": plain(node_settings),
                "offset": offset,
                "target": target,
                "witness": str(witness),
            }
            processes.append(launch_node(__file__, config))
        launched[backend] = (Race(target, base, witness, [], [], []), processes)

    def start() -> str:
        first = int(time.time()) + LEAD_SECONDS
        for race, _ in launched.values():
            race.instants = [
                datetime.fromtimestamp(first + k, UTC).isoformat() for k in range(FIRES)
            ]
        return str(first)

    def record(race: Race, line: dict[str, Any]) -> None:
        race.outcomes.append((line["instant"], line["status"]))

    drive_races(launched, start, record)
    return {backend: race for backend, (race, _) in launched.items()}


@pytest.mark.parametrize("backend", BACKENDS)
class TestSkewedNodes:
    def test_every_node_finished_cleanly(self, races: dict[str, Race], backend: str) -> None:
        assert races[backend].exit_codes == [0, 0, 0]

    def test_each_fire_ran_exactly_once(self, races: dict[str, Race], backend: str) -> None:
        race = races[backend]
        runs = Counter(line.split()[0] for line in race.witness.read_text().splitlines())
        duplicates = {instant: n for instant, n in runs.items() if n > 1}
        assert duplicates == {}
        skipped = {r.instant.isoformat() for r in _records(race) if r.state is RunState.SKIPPED}
        missed = set(race.instants) - set(runs) - skipped
        assert missed == set()
        assert len(runs) == FIRES  # nothing was skipped either, with a 1 ms body

    def test_every_other_attempt_found_the_fire_claimed(
        self, races: dict[str, Race], backend: str
    ) -> None:
        by_instant: dict[str, Counter[str]] = {}
        for instant, status in races[backend].outcomes:
            by_instant.setdefault(instant, Counter())[status] += 1
        assert len(races[backend].outcomes) == 3 * FIRES
        expected = Counter({Verdict.SUCCEEDED.value: 1, Verdict.CLAIMED_ELSEWHERE.value: 2})
        assert {
            instant: counts for instant, counts in by_instant.items() if counts != expected
        } == {}

    def test_the_history_holds_one_first_attempt_per_fire(
        self, races: dict[str, Race], backend: str
    ) -> None:
        records = _records(races[backend])
        assert sorted(r.instant.isoformat() for r in records) == races[backend].instants
        assert {(r.state, r.attempt) for r in records} == {(RunState.SUCCEEDED, 1)}


def _records(race: Race) -> list[RunRecord]:
    history = resolve_history(race.settings)
    assert history is not None
    try:
        return history.runs(race.target, limit=10 * FIRES)
    finally:
        history.close()


if __name__ == "__main__":
    node_main(json.loads(sys.argv[1]))
