"""The operator of a chaos run: `python steer_client.py`, one process beside the nodes.

It reads one JSON command a line on stdin (`{"op": "pause" | "resume" | "trigger" |
"backfill"}`) and runs it with `ScheduleControl` on the setup's control store (its
run's own table on a shared SQL server, `control_store`), reached directly (no
proxy: the operator is not on the faulted network), with the
settings of its environment. Each command is stamped on the evidence log twice, as
`steer` events: `sent` just before the call, and `done` (`ok` true) or `failed`
(the error) once it returned, with `wall`, this host's real time at that stamp,
which no offset of the nemesis touches. What each carries:

* `pause` / `resume`: the task (`STEERED`);
* `trigger`: the trigger's `instant`, the fire it names (its time on the store's clock);
* `backfill`: a window `[start, end)`, `again` when it was asked before: the last
  pause that ended, from its return to the resume's send (the fires it skipped as
  paused are the ones to run); else the last window once more (nothing may run
  twice); else a recent past window (only the fires that did not succeed run).
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos_harness.control_store import run_control_store
from chaos_harness.evidence import EvidenceLog
from chaos_harness.steering_nemesis import STEERED
from firefly_scheduling import ScheduleControl
from firefly_scheduling.errors import FireflySchedulingError
from firefly_scheduling.settings import Settings

#: Who the operator is, in the audit trail and the history's `requested_by`.
OPERATOR = "chaos-operator"
#: The recent past window a backfill asks for when no pause ended: from 4 periods of
#: a second ago to 1 (stretched by the pace).
RECENT_WINDOW = (4.0, 1.0)
PACE = float(os.environ.get("FIREFLY_CHAOS_PACE", "1"))


class Operator:
    """Runs the commands, remembering the last pause that ended (for `backfill`)."""

    def __init__(self, control: ScheduleControl, evidence: EvidenceLog) -> None:
        self._control = control
        self._evidence = evidence
        self._paused_at: float | None = None
        self._last_pause: tuple[float, float] | None = None
        self._last_backfill: tuple[float, float] | None = None
        self._asked_again = False

    def run(self, op: str) -> None:
        fields: dict[str, Any] = {"op": op, "task": STEERED}
        if op == "backfill":
            start, end = self._backfill_window()
            fields |= {"start": _iso(start), "end": _iso(end), "again": self._asked_again}
        self._evidence.append("steer", phase="sent", wall=time.time(), **fields)
        try:
            fields |= self._call(op, fields)
        except FireflySchedulingError as err:
            self._evidence.append(
                "steer", phase="failed", wall=time.time(), error=str(err)[:300], **fields
            )
            return
        wall = time.time()
        self._evidence.append("steer", phase="done", wall=wall, **fields)
        if op == "pause":
            self._paused_at = wall

    def _backfill_window(self) -> tuple[float, float]:
        again = False
        if self._last_pause is not None:
            window, self._last_pause = self._last_pause, None
        elif self._last_backfill is not None and not self._asked_again:
            window, again = self._last_backfill, True
        else:
            now = time.time()
            window = (now - RECENT_WINDOW[0] * PACE, now - RECENT_WINDOW[1] * PACE)
        self._last_backfill, self._asked_again = window, again
        return window

    def _call(self, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        if op == "pause":
            self._control.pause(STEERED, note="chaos", by=OPERATOR)
            return {}
        if op == "resume":
            sent = time.time()
            lifted = self._control.resume(STEERED, by=OPERATOR)
            if self._paused_at is not None:
                self._last_pause = (self._paused_at, sent)
                self._paused_at = None
            return {"lifted": lifted}
        if op == "trigger":
            asked = self._control.trigger(STEERED, by=OPERATOR)
            return {"instant": _iso(asked.requested_at), "id": asked.id}
        if op == "backfill":
            start = datetime.fromisoformat(fields["start"])
            end = datetime.fromisoformat(fields["end"])
            self._control.backfill(STEERED, start, end, by=OPERATOR)
            return {}
        raise ValueError(f"unknown steering command {op!r}")


def _iso(seconds: float) -> str:
    """A time as the hosts name a trigger's fire (`datetime.fromtimestamp(…, UTC)`)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def main() -> int:
    evidence = EvidenceLog(Path(os.environ["FIREFLY_CHAOS_EVIDENCE"]))
    store = run_control_store(Settings.from_env(), os.environ["FIREFLY_CHAOS_PREFIX"])
    try:
        with ScheduleControl(store=store) as control:
            operator = Operator(control, evidence)
            evidence.append("steer_ready")
            for line in sys.stdin:
                if line.strip():
                    operator.run(json.loads(line)["op"])
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
