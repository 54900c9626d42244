"""The seeded fault schedule, and its injection into one setup's nodes, proxies and server.

The schedule (which fault, when, on which node, for how long) is drawn from
`random.Random(f"{seed}:{setup}")`, so `--seed N` replays it; the processes' own
timing is the machine's, as in any Jepsen run. Every kind applicable to the setup
comes once in a shuffled first round (the kill last), so even a short run injects
all of them, then kinds are drawn uniformly. At most `nodes - 1` resident nodes are
disturbed (paused, killed, cut off, still booting after a restart) at once: someone
must be able to run the fires. A node whose history fails is not disturbed: it runs
its fires all the same (the history never stops a fire). The steering kinds are an
operator's commands (`steering_nemesis`), sent while the other faults go on.
"""

from __future__ import annotations

import heapq
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from functools import partial

from chaos_harness.cluster import ChaosNode
from chaos_harness.effects_nemesis import EFFECTS_KINDS, BlockWatcher, effects_kinds, inject_aimed
from chaos_harness.evidence import EvidenceLog
from chaos_harness.servers import end_sessions, session_pids, signal_processes
from chaos_harness.setups import Backend
from chaos_harness.steering_nemesis import (
    STEERING_KINDS,
    OperatorProcess,
    inject_steering,
    steering_kinds,
)
from firefly_scheduling.fires.recording import FINISH_RETRY_SECONDS

PROXY_KINDS = ("latency", "stall", "reset", "blackhole")
#: `history`: every write of a node's history fails; `history_start`: its `start`
#: fails, hangs then fails, or hangs, is written and its reply lost; `history_finish`:
#: the end of its runs (`finish`, `record_run`) fails for longer than the runner
#: retries it at least (`FINISH_RETRY_SECONDS`).
HISTORY_KINDS = ("history", "history_start", "history_finish")
ALWAYS_KINDS = ("pause", "kill", "clock", *HISTORY_KINDS)
#: How a `history_start` fault acts (`node.FlakyHistory`).
START_FAULT_MODES = ("fail", "hang", "late")
#: Mean seconds between two faults.
MEAN_INTERVAL = 1.0
#: The tasks' lease (`chaos_harness.tasks.LOCK_TTL`): a pause must outlive it.
LEASE_SECONDS = 1.0
CLOCK_OFFSET_SECONDS = 2.0
#: A frozen session's longest freeze: past the clients' 10 s reply deadline, so some
#: freezes end by the deadline and others by the server waking first.
MAX_FREEZE_SECONDS = 14.0


def kinds_for(backend: Backend) -> tuple[str, ...]:
    kinds = list(ALWAYS_KINDS)
    if backend.proxied:
        kinds += PROXY_KINDS
    if backend.server is not None:
        kinds.append("restart")
    if backend.sessions is not None:
        kinds.append("sessions")
    if backend.sessions == "postgres":  # its sessions are processes of this machine
        kinds.append("freeze")
    return (*kinds, *effects_kinds(backend), *steering_kinds(backend))


class Nemesis:
    """Injects faults until `stop_at` (monotonic seconds), then heals everything."""

    def __init__(
        self,
        backend: Backend,
        nodes: list[ChaosNode],
        evidence: EvidenceLog,
        rng: random.Random,
        pace: float = 1.0,
        operator: OperatorProcess | None = None,
    ) -> None:
        self.backend = backend
        #: Sends the steering kinds' commands (None: the setup has none).
        self.operator = operator
        self.nodes = nodes
        #: Every task's rate is stretched this much: a history fault lasts as many fires.
        self.pace = pace
        self.evidence = evidence
        self.rng = rng
        self.kinds = kinds_for(backend)
        self.injected: Counter[str] = Counter()
        self._first_round = list(self.kinds)
        rng.shuffle(self._first_round)
        # Popped from the end: the kinds aimed at an open block come first in the
        # first round, while every node is calm and running fires, and the kill
        # last, because a killed node takes a while to boot again and nothing else
        # that needs a calm node can be injected meanwhile.
        self._first_round.sort(key=lambda kind: (kind != "kill", kind in EFFECTS_KINDS))
        self._undo: list[tuple[float, int, Callable[[], object]]] = []
        self._sequence = 0
        #: Which nodes have an `atomic` block open (aimed kinds of the effects setups).
        self.blocks = BlockWatcher(evidence.path)

    def later(self, delay: float, action: Callable[[], object]) -> None:
        self._sequence += 1
        heapq.heappush(self._undo, (time.monotonic() + delay, self._sequence, action))

    def run_due(self) -> None:
        while self._undo and self._undo[0][0] <= time.monotonic():
            _, _, action = heapq.heappop(self._undo)
            action()

    def next_kind(self) -> str:
        return self._first_round.pop() if self._first_round else self.rng.choice(self.kinds)

    def _calm(self) -> list[ChaosNode]:
        """Resident nodes that may be disturbed now, keeping one undisturbed."""
        now = time.monotonic()
        residents = [node for node in self.nodes if node.host == "run"]
        calm = [node for node in residents if node.disturbed_until <= now and node.booted]
        return calm if len(calm) >= 2 else []

    def inject(self) -> None:
        kind = self.next_kind()
        if kind in EFFECTS_KINDS:
            inject_aimed(self, kind)
            return
        if kind in STEERING_KINDS:
            assert self.operator is not None, "a steering kind without an operator"
            self._record(kind, "operator", *inject_steering(self, self.operator, kind))
            return
        duration = 0.0
        detail = ""
        if kind == "clock":
            node = self.rng.choice(self.nodes)
        elif kind in HISTORY_KINDS:
            # A resident node: it is always up to feel the fault (a tick comes and goes).
            node = self.rng.choice([node for node in self.nodes if node.host == "run"])
        else:
            calm = self._calm()
            if kind not in {"restart", "sessions"} and not calm:
                self._first_round.append(kind)  # try again at the next slot
                return
            node = self.rng.choice(calm) if calm else self.rng.choice(self.nodes)
        if kind == "clock":
            node.offset = round(self.rng.uniform(-CLOCK_OFFSET_SECONDS, CLOCK_OFFSET_SECONDS), 3)
            node.write_control()
            detail = f"offset {node.offset:+.3f}s"
        elif kind in HISTORY_KINDS:
            duration, detail = self._history_fault(kind, node)
        elif kind == "pause":
            duration = LEASE_SECONDS + self.rng.uniform(0.2, 2.5)
            node.pause()
            self.later(duration, node.resume)
        elif kind == "kill":
            duration = self.rng.uniform(0.3, 2.0)
            node.kill()
            self.later(duration, node.spawn)
        elif kind == "latency":
            duration = self.rng.uniform(1.0, 5.0)
            seconds = self.rng.uniform(0.02, 0.3)
            detail = f"{seconds * 1000:.0f} ms"
            node.proxy.latency(seconds, duration)  # type: ignore[union-attr]
        elif kind == "stall":
            duration = self.rng.uniform(0.3, 2.5)
            node.proxy.stall(duration)  # type: ignore[union-attr]
        elif kind == "reset":
            detail = f"{node.proxy.reset()} connection(s)"  # type: ignore[union-attr]
        elif kind == "blackhole":
            duration = self.rng.uniform(0.5, 3.0)
            node.proxy.blackhole(duration)  # type: ignore[union-attr]
        elif kind == "restart":
            assert self.backend.server is not None
            # Stamped before the kill and once the killed server is reaped: the data was
            # lost at some instant in between, before the new server took a claim.
            self.evidence.append("restarting", node="server")
            self.backend.server.restart(lambda: self.evidence.append("server_down", node="server"))
            node_name = "server"
            self._record(kind, node_name, duration, detail)
            return
        elif kind == "sessions":
            assert self.backend.sessions is not None
            victims = self.nodes if self.rng.random() < 0.3 else [node]
            ports = {port for victim in victims for port in victim.proxy.upstream_ports()}  # type: ignore[union-attr]
            ended = end_sessions(self.backend.sessions, self.backend.url, ports)
            detail = f"{ended} session(s) of {', '.join(v.name for v in victims)}"
        elif kind == "freeze":
            duration = self.rng.uniform(1.0, MAX_FREEZE_SECONDS)
            pids = session_pids(self.backend.url, node.proxy.upstream_ports())  # type: ignore[union-attr]
            frozen = signal_processes(pids, signal.SIGSTOP)
            self.later(duration, partial(signal_processes, pids, signal.SIGCONT))
            detail = f"{frozen} session(s)"
        if kind not in HISTORY_KINDS:  # a node whose history fails still runs its fires
            node.disturbed_until = max(node.disturbed_until, time.monotonic() + duration + 0.5)
        self._record(kind, node.name, duration, detail)

    def _history_fault(self, kind: str, node: ChaosNode) -> tuple[float, str]:
        """Make `node`'s history writes fail (see `HISTORY_KINDS`); its duration and detail."""
        mode, hang = "fail", 0.0
        if kind == "history":
            writes, duration = "all", self.rng.uniform(0.5, 4.0) * self.pace
        elif kind == "history_start":
            writes, duration = "start", self.rng.uniform(1.0, 6.0) * self.pace
            mode = self.rng.choice(START_FAULT_MODES)
            hang = 0.0 if mode == "fail" else self.rng.uniform(0.2, 2.0)
        else:
            writes = "finish"
            duration = FINISH_RETRY_SECONDS + self.rng.uniform(0.5, FINISH_RETRY_SECONDS)
        at = time.monotonic_ns()
        node.history_faults[writes] = {
            "at": at,
            "until": at + int(duration * 1e9),
            "mode": mode,
            "hang": round(hang, 3),
        }
        node.write_control()
        return duration, f"{writes}: {mode}" + (f" after {hang:.1f}s" if hang else "")

    def _record(self, kind: str, node: str, duration: float, detail: str) -> None:
        self.injected[kind] += 1
        self.evidence.append(
            "fault", kind=kind, node=node, duration=round(duration, 3), detail=detail
        )

    def heal(self) -> None:
        """Undo every fault still in effect (resume, respawn, clear history failures)."""
        while self._undo:
            _, _, action = heapq.heappop(self._undo)
            action()
        for node in self.nodes:
            node.resume()
            node.history_faults.clear()
            node.write_control()

    def pause_between(self) -> float:
        return self.rng.expovariate(1.0 / MEAN_INTERVAL)
