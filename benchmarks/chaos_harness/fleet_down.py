"""The whole fleet down at once: every node killed, and none back for a while.

The nemesis always keeps one resident node up, and a fleet that is up records every
fire it does not run, so catch-up (`catchup=`), which runs the fires no node recorded,
would never act. Once per run, from the middle of it, every node is SIGKILLed (each
kill stamped, as the nemesis stamps its own), kept down for `seconds` (a node the
nemesis brings back meanwhile is killed again, and no fault is injected), then
started again; faults resume once every resident node has booted, and the run's
faults last that much longer. `fleet_down` and `fleet_up` bound the span on the
evidence log: the
checker excuses the fires of that span that no node recorded, except a catch-up
task's, which the first node back must run (`policy_rules`).
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
    #: When every resident node had booted again (monotonic seconds).
    booted_at: float | None = None

    @property
    def active(self) -> bool:
        """Down, or booting again: no fault is injected, and no `tick` started."""
        return self.state in {"down", "booting"}

    @property
    def outage(self) -> float:
        """Seconds from going down until every resident node booted again (so far): the
        run's faults go on that much longer, so that every fault kind still comes."""
        if self.state == "pending":
            return 0.0
        return (self.booted_at or time.monotonic()) - self.at

    def step(self) -> None:
        """Called from the run's loop: go down, keep down, or come back, as due."""
        now = time.monotonic()
        if self.state == "pending" and now >= self.at:
            self.evidence.append("fleet_down", node="fleet", seconds=self.seconds)
            self.state = "down"
        if self.state == "booting":
            if all(node.booted for node in self.nodes if node.host == "run"):
                self.booted_at, self.state = now, "done"
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
