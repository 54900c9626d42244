"""The whole fleet down at once: every node killed, and none back for a while.

The nemesis always keeps one resident node up, and a fleet that is up records every
fire it does not run, so catch-up (`catchup=`), which runs the fires no node recorded,
would never act. Once per run long enough (`run.FLEET_DOWN_MIN_SECONDS`), from the
middle of it and once every fault kind was injected (the nemesis's first round),
every node is SIGKILLed (each kill stamped, as the nemesis stamps its own), kept down
for `seconds` (a node the nemesis brings back meanwhile is killed again, and no fault
is injected), then started again; faults resume once every resident node has
booted. `fleet_down` and `fleet_up` bound the span on the evidence log: the checker
excuses the fires of that span that no node recorded, except a catch-up task's,
which the first node back must run (`policy_rules`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from chaos_harness.cluster import ChaosNode
from chaos_harness.evidence import EvidenceLog

#: How long after the fleet is back a node may still be booting (its scheduler not
#: yet started): seconds added to the first boot stamp the checker reads.
BOOT_SECONDS = 6.0


@dataclass
class FleetDown:
    """Takes `nodes` down at `at` (monotonic seconds) for `seconds`, once."""

    nodes: list[ChaosNode]
    evidence: EvidenceLog
    at: float
    seconds: float
    #: `pending`, `down`, `booting` (started again, not every resident node booted), `done`.
    state: str = "pending"

    @property
    def active(self) -> bool:
        """Down, or booting again: no fault is injected, and no `tick` started."""
        return self.state in {"down", "booting"}

    def step(self, *, ready: bool) -> None:
        """Called from the run's loop: go down (once `at` has come and the run is
        `ready`: every fault kind was injected once), keep down, or come back."""
        now = time.monotonic()
        if self.state == "pending" and now >= self.at and ready:
            self.evidence.append("fleet_down", node="fleet", seconds=self.seconds)
            self.at, self.state = now, "down"
        if self.state == "booting":
            if all(node.booted for node in self.nodes if node.host == "run"):
                self.state = "done"
            return
        if self.state != "down":
            return
        for node in self.nodes:
            if node.alive:
                node.kill()
        if now >= self.at + self.seconds:
            self.evidence.append("fleet_up", node="fleet")
            for node in self.nodes:
                if node.host == "run":
                    node.spawn()
                    node.disturbed_until = time.monotonic() + BOOT_SECONDS
            self.state = "booting"
