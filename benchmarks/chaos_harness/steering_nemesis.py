"""Operators' steering as nemesis operations: pause, resume, trigger, backfill.

An operator process of its own (`steer_client`) sends each command to the control
store the nodes steer from, while the other faults go on; the rules that judge what
the nodes did are `steering_rules`. The kinds, drawn like any fault:

* `steer_pause`: pause the steered task, and resume it after 1 to 4 s (stretched by
  the pace); while paused, a second pause only renews it;
* `steer_trigger`: ask for one extra run of it (while paused too: it runs anyway);
* `steer_backfill`: replay the window of the last pause that ended (its fires were
  skipped as paused, so each must run once now), else the last window again
  (nothing may run twice), else a recent past one.

`FIREFLY_CHAOS_STEERING=0` leaves them out (and the nodes then read no control store).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chaos_harness.nemesis import Nemesis
    from chaos_harness.setups import Backend

STEERING_KINDS = ("steer_pause", "steer_trigger", "steer_backfill")
#: The task the operator steers: two fires a second at pace 1, a 1 ms body.
STEERED = "chaos_harness.tasks:quick2"
#: The shortest and longest pause, in seconds at pace 1.
PAUSE_SECONDS = (1.0, 4.0)
CLIENT_SCRIPT = Path(__file__).resolve().parent / "steer_client.py"


def with_steering() -> bool:
    """Whether the operator steers (`FIREFLY_CHAOS_STEERING`, on unless `0`)."""
    return os.environ.get("FIREFLY_CHAOS_STEERING", "1") != "0"


def steering_kinds(backend: Backend) -> tuple[str, ...]:
    """The steering kinds, where the setup has a durable control store (not memcached)
    and runs the task mix (not an effects setup)."""
    if not with_steering() or backend.effects or backend.provider == "memcached":
        return ()
    return STEERING_KINDS


class OperatorProcess:
    """The operator process: commands go to its stdin, one JSON line each."""

    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        output = (workdir / "operator.out").open("ab")
        self._process = subprocess.Popen(
            [sys.executable, str(CLIENT_SCRIPT)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
        self.paused = False

    def send(self, op: str) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({"op": op}).encode() + b"\n")
        self._process.stdin.flush()

    def resume(self) -> None:
        if self.paused:
            self.send("resume")
            self.paused = False

    def close(self, timeout: float) -> None:
        """Let the commands sent finish, then end the process (killed after `timeout`)."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def inject_steering(nemesis: Nemesis, operator: OperatorProcess, kind: str) -> tuple[float, str]:
    """Send the command of `kind`; the fault's duration and detail."""
    if kind == "steer_pause":
        if operator.paused:
            operator.send("pause")
            return 0.0, "paused again"
        low, high = PAUSE_SECONDS
        duration = nemesis.rng.uniform(low, high) * nemesis.pace
        operator.send("pause")
        operator.paused = True
        nemesis.later(duration, operator.resume)
        return duration, ""
    if kind == "steer_trigger":
        operator.send("trigger")
        return 0.0, "while paused" if operator.paused else ""
    operator.send("backfill")
    return 0.0, ""
