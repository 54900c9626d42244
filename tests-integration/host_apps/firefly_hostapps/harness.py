"""Start and stop real node processes for the host tests, and read what they recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HOST_APPS = Path(__file__).resolve().parent.parent
_CLI = "import sys; from firefly_scheduling.cli import main; sys.exit(main())"
# Variables of the parent environment that would change what a node does.
_OWN_PREFIXES = (
    "FIREFLY_SCHEDULING_",
    "FIREFLY_SCAN_",
    "FIREFLY_HOSTAPP_",
    "DATABASE_URL",
    "REDIS_URL",
)


def node_env(workdir: Path, **variables: str) -> dict[str, str]:
    """A clean environment for a node: only the given firefly variables, no stray manifest."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(_OWN_PREFIXES)}
    env["FIREFLY_SCHEDULING_MANIFEST"] = str(workdir / "no-manifest.json")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(variables)
    return env


@dataclass
class Node:
    """One node process and the file its output goes to."""

    name: str
    process: subprocess.Popen[bytes]
    output: Path
    signalled: bool = False

    def terminate(self) -> None:
        """Send SIGTERM once (a second one would cut the grace period short)."""
        if not self.signalled and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.signalled = True

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait (SIGKILL after `timeout`); the exit status."""
        self.terminate()
        return self.wait(timeout)

    def wait(self, timeout: float = 90.0) -> int:
        """The exit status; the process is killed (and the error raised) after `timeout`."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait_for_output(self, marker: str, timeout: float) -> bool:
        """Wait (bounded) until `marker` appears in the output or the process ends."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.text():
                return True
            if self.process.poll() is not None:
                return marker in self.text()
            time.sleep(0.05)
        return False


def start_node(
    command: str,
    name: str,
    *,
    app: str,
    env: dict[str, str],
    workdir: Path,
    args: tuple[str, ...] = (),
) -> Node:
    """Start `firefly-scheduling <command> --app <app> --node <name>` as a new process."""
    output = workdir / f"{name}.out"
    arguments = [command, "--app", app, "--path", str(HOST_APPS), "--node", name, *args]
    with output.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", _CLI, *arguments],
            env={**env, "FIREFLY_SCHEDULING_NODE": name},
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    return Node(name, process, output)


@dataclass(frozen=True)
class Run:
    """One run of a task, as the task itself recorded it."""

    node: str
    start: float
    end: float


def log_fields(path: Path) -> list[list[str]]:
    """The fields of every line of a witness log (none while it does not exist)."""
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines()]


def read_runs(path: Path) -> list[Run]:
    """Every complete line of a task log, in order of start."""
    runs = [Run(node, float(start), float(end)) for node, start, end in log_fields(path)]
    return sorted(runs, key=lambda run: run.start)


def overlaps(runs: list[Run]) -> list[tuple[Run, Run]]:
    """Pairs of runs that were inside the body at the same time."""
    ordered = sorted(runs, key=lambda run: run.start)
    found = []
    latest: Run | None = None
    for run in ordered:
        if latest is not None and run.start < latest.end:
            found.append((latest, run))
        if latest is None or run.end > latest.end:
            latest = run
    return found


STARTED = "resident host started"


def wait_for(path: Path, lines: int, timeout: float) -> bool:
    """Wait (bounded) until `path` has at least `lines` lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= lines:
            return True
        time.sleep(0.05)
    return False


def lock_is_free(probe: Any, name: str) -> bool:
    """Whether `probe` (a new lock on the nodes' server) can take `name`; it is closed after.

    A node that exits must have released its locks: on a lease backend an unreleased
    one would stay taken for its whole TTL, so a free name right after exit proves it.
    """
    try:
        acquired = bool(probe.try_acquire(name, 5))
        if acquired:
            probe.release(name)
        return acquired
    finally:
        probe.close()


def wait_for_early_minute() -> None:
    """Sleep (at most ~25 s) until 25 s of the minute are left, so a tick pass is not ending."""
    second = datetime.now(UTC).second
    if second > 35:
        time.sleep(60 - second + 0.2)
