"""Faults: a node killed mid-body (kill -9) and a node stopped past its lease (SIGSTOP).

The victim is a real OS process (this file run as a script) running one fire of a
locked task through `FireRunner`, with a 2 s lock TTL renewed every 0.67 s. This
test process is the surviving node: it fires the task's next instants every 0.5 s
with its own lock instance, as a resident host would.

* kill -9: the victim's lease lapses (lease backends) or its session ends (session
  backends); the survivor's next fire finds the died run in the history and adopts
  it within grace as attempt 2. The history then shows one terminal state for that
  fire, and the witness shows the adopted run started only after the victim died.
* SIGSTOP (lease backends): the stopped victim renews nothing, its lease lapses and
  the survivor adopts the fire. Resumed, the zombie finishes its body but its
  history write is refused (fenced) and the record keeps the adopter's state.
  (A stopped process keeps its PostgreSQL/MySQL session, hence its lock: there the
  fire simply waits for it.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import RunState, resolve_history
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_matrix import BACKENDS, LEASE_BACKENDS, install_tables, lock_settings, server_urls

pytestmark = pytest.mark.slow

LOCK_TTL = 2.0
STARTED = "started"
#: Longest the survivor keeps firing before the test gives up (lease lapse is ~2 s).
ADOPTION_SECONDS = 20.0


def settings_for(backend: str, urls: dict[str, str], workdir: Path, node: str) -> Settings:
    return lock_settings(backend, urls, workdir, node, f"sqlite:///{workdir / 'history.db'}")


def descriptor_for(target: str) -> ScheduledDescriptor:
    return ScheduledDescriptor(target=target, fixed_rate=1.0, lock_name=target, lock_ttl=LOCK_TTL)


# -- the victim process ---------------------------------------------------------------


def victim_main(config: dict[str, object]) -> None:
    """Run one fire whose body says `started`, then works for `work` seconds."""
    fields = dict(config["settings"])  # type: ignore[call-overload]
    settings = Settings(**fields)
    lock = resolve_lock(settings)
    runner = FireRunner.from_settings(lock, settings)
    instant = datetime.fromisoformat(str(config["instant"]))
    witness = Path(str(config["witness"]))

    def body() -> None:
        with witness.open("a") as log:
            log.write(f"{settings.node} start {time.time()}\n")
        print(STARTED, flush=True)
        time.sleep(float(config["work"]))  # type: ignore[arg-type]
        with witness.open("a") as log:
            log.write(f"{settings.node} end {time.time()}\n")

    outcome = runner.run(Fire.at(descriptor_for(str(config["target"])), instant), body)
    print(json.dumps({"status": outcome.verdict.value, "fenced": outcome.fenced}), flush=True)
    runner.close()


# -- the survivor -------------------------------------------------------------------------


@dataclass
class Scene:
    backend: str
    settings: Settings
    target: str
    instant: datetime
    witness: Path
    victim: subprocess.Popen[str]


@pytest.fixture
def urls(request: pytest.FixtureRequest) -> dict[str, str]:
    return server_urls(request, BACKENDS)


@contextmanager
def start_victim(backend: str, urls: dict[str, str], workdir: Path, work: float) -> Iterator[Scene]:
    target = f"faults_{backend.replace('-', '_')}_{uuid.uuid4().hex[:8]}:job"
    witness = workdir / "witness.log"
    witness.touch()
    survivor_settings = settings_for(backend, urls, workdir, "survivor")
    install_tables(backend, urls, workdir)
    instant = datetime.now(UTC).replace(microsecond=0)
    victim_settings = {
        key: value
        for key, value in vars(settings_for(backend, urls, workdir, "victim")).items()
        if key != "manifest_path"
    }
    config = {
        "settings": victim_settings,
        "instant": instant.isoformat(),
        "target": target,
        "witness": str(witness),
        "work": work,
    }
    victim = subprocess.Popen(
        [sys.executable, __file__, json.dumps(config)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline().strip() == STARTED  # bounded by pytest's timeout
        yield Scene(backend, survivor_settings, target, instant, witness, victim)
    finally:
        if victim.poll() is None:
            victim.kill()
        victim.wait(timeout=30)


def fire_as_survivor(scene: Scene, *, until_adopted: bool, seconds: float) -> list[FireResult]:
    """Fire the task's next instants every 0.5 s as the survivor.

    Stops at the first fire that adopts the victim's fire when `until_adopted`, and
    fails if none did within `seconds`; otherwise fires for `seconds`.
    """
    lock = resolve_lock(scene.settings)
    runner = FireRunner.from_settings(lock, scene.settings)

    def survivor_body() -> None:
        with scene.witness.open("a") as log:
            log.write(f"survivor start {time.time()}\n")

    outcomes: list[FireResult] = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            outcomes.append(
                runner.run(Fire.at(descriptor_for(scene.target), datetime.now(UTC)), survivor_body)
            )
            if until_adopted and outcomes[-1].adopted:
                return outcomes
            time.sleep(0.5)
    finally:
        runner.close()
        getattr(lock, "close", lambda: None)()
    if until_adopted:
        pytest.fail(f"no adoption within {seconds}s ({len(outcomes)} fires)")
    return outcomes


def victim_record(scene: Scene) -> list[tuple[RunState, int, str]]:
    history = resolve_history(scene.settings)
    assert history is not None
    try:
        return [
            (r.state, r.attempt, r.node)
            for r in history.runs(scene.target, limit=1000)
            if r.instant == scene.instant
        ]
    finally:
        history.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fire_killed_mid_body_is_adopted_as_attempt_two(
    backend: str, urls: dict[str, str], tmp_path: Path
) -> None:
    with start_victim(backend, urls, tmp_path, work=60.0) as scene:
        # While the victim runs (longer than its 2 s lease: keep-alive), nothing else starts.
        meanwhile = fire_as_survivor(scene, until_adopted=False, seconds=2 * LOCK_TTL)
        assert {o.verdict for o in meanwhile} == {Verdict.OVERLAPPING}
        os.kill(scene.victim.pid, signal.SIGKILL)
        scene.victim.wait(timeout=30)
        killed_at = time.time()
        outcome = fire_as_survivor(scene, until_adopted=True, seconds=ADOPTION_SECONDS)[-1]
        [adopted] = outcome.adopted
        assert (adopted.verdict, adopted.instant, adopted.attempt) == (
            Verdict.SUCCEEDED,
            scene.instant,
            2,
        )
        assert victim_record(scene) == [(RunState.SUCCEEDED, 2, "survivor")]
        runs = [line.split() for line in scene.witness.read_text().splitlines()]
        assert runs[0][:2] == ["victim", "start"]
        assert all(who == "survivor" and what == "start" for who, what, _ in runs[1:])
        # The survivor ran nothing before the victim was dead: no two runs overlapped.
        assert min(float(at) for _, _, at in runs[1:]) > killed_at


@pytest.mark.parametrize("backend", LEASE_BACKENDS)
def test_a_zombie_resumed_after_adoption_is_fenced(
    backend: str, urls: dict[str, str], tmp_path: Path
) -> None:
    with start_victim(backend, urls, tmp_path, work=1.0) as scene:
        os.kill(scene.victim.pid, signal.SIGSTOP)
        try:
            time.sleep(LOCK_TTL + 0.5)  # its lease lapses: a stopped process renews nothing
            outcome = fire_as_survivor(scene, until_adopted=True, seconds=ADOPTION_SECONDS)[-1]
        finally:
            os.kill(scene.victim.pid, signal.SIGCONT)
        assert [(o.instant, o.attempt) for o in outcome.adopted] == [(scene.instant, 2)]
        out, _ = scene.victim.communicate(timeout=30)
        zombie = json.loads(out.strip().splitlines()[-1])
        assert zombie == {"status": Verdict.SUCCEEDED.value, "fenced": True}
        assert victim_record(scene) == [(RunState.SUCCEEDED, 2, "survivor")]


if __name__ == "__main__":
    victim_main(json.loads(sys.argv[1]))
