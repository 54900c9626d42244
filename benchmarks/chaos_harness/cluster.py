"""The node processes of one setup: spawn, signal, restart, stop; and their control files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos_harness.evidence import EvidenceLog
from chaos_harness.proxy import FaultyProxy

NODE_SCRIPT = Path(__file__).resolve().parent / "node.py"
#: Variables of the parent environment that would change what a node does.
_OWN_PREFIXES = ("FIREFLY_SCHEDULING_", "FIREFLY_SCAN_", "FIREFLY_CHAOS_", "DATABASE_URL")


@dataclass
class ChaosNode:
    """One node (a resident `run`, or the current minute's `tick`) and its seams."""

    name: str
    host: str
    workdir: Path
    env: dict[str, str]
    evidence: EvidenceLog
    proxy: FaultyProxy | None = None
    process: subprocess.Popen[bytes] | None = None
    offset: float = 0.0
    #: The faults of this node's history writes, by the writes they hit (`node.WriteFault`).
    history_faults: dict[str, dict[str, object]] = field(default_factory=dict)
    paused: bool = False
    disturbed_until: float = 0.0
    spawned: int = field(default=0)

    @property
    def control(self) -> Path:
        return self.workdir / f"{self.name}.control.json"

    def write_control(self) -> None:
        partial = self.control.with_suffix(".tmp")
        partial.write_text(json.dumps({"offset": self.offset, "history": self.history_faults}))
        partial.replace(self.control)  # atomic: the node never reads half a file

    @property
    def booted(self) -> bool:
        """Whether this process has booted (its fires are being handled)."""
        try:
            return self.alive and int(self.control.with_suffix(".booted").read_text()) == self.pid
        except (OSError, ValueError):
            return False

    def spawn(self) -> None:
        self.control.with_suffix(".booted").unlink(missing_ok=True)
        self.write_control()
        output = (self.workdir / f"{self.name}.out").open("ab")
        env = {**self.env, "FIREFLY_CHAOS_CONTROL": str(self.control)}
        self.process = subprocess.Popen(
            [sys.executable, str(NODE_SCRIPT), self.host, self.name],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
        )
        self.spawned += 1

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        return 0 if self.process is None else self.process.pid

    def kill(self) -> None:
        if self.process is None:
            return
        if self.alive:
            self.process.send_signal(signal.SIGKILL)
            self.evidence.append("kill", victim=self.pid, node=self.name)
        self.process.wait()
        self.paused = False

    def pause(self) -> None:
        if self.alive:
            self.process.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
            self.paused = True
            self.evidence.append("pause", victim=self.pid, node=self.name)

    def resume(self) -> None:
        if self.paused and self.alive:
            # Stamped before the signal, as a pause is after its own: the node cannot
            # run before this stamp, whereas one taken after SIGCONT may come after
            # the resumed node's first witness line (the CI lane, seed 8 on Redis: a
            # late zombie body stamped 2.6 ms before its node's "resume").
            self.evidence.append("resume", victim=self.pid, node=self.name)
            self.process.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
        self.paused = False

    def terminate(self) -> None:
        self.resume()
        if self.alive:
            self.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]

    def wait_stopped(self, timeout: float) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def node_env(workdir: Path, **variables: str) -> dict[str, str]:
    """A clean environment: only this run's firefly variables, no stray manifest."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(_OWN_PREFIXES)}
    env["FIREFLY_SCHEDULING_MANIFEST"] = str(workdir / "no-manifest.json")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(variables)
    return env


def wait_booted(evidence_path: Path, names: set[str], timeout: float) -> bool:
    """Wait (bounded) for a `boot` event from every node in `names`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        booted = set()
        if evidence_path.exists():
            for line in evidence_path.read_text().splitlines():
                if '"ev": "boot"' in line:
                    booted.add(json.loads(line)["node"])
        if names <= booted:
            return True
        time.sleep(0.2)
    return False
