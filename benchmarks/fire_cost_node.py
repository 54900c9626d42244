"""One measurement of `benchmarks/fire_cost.py`: a real node's CPU per fire attempt.

A `firefly-scheduling run` process on generated no-op tasks, its CPU read from outside
over a window of whole seconds; in `lose` mode a hog thread claims every fire first.
The attempts are counted from evidence the node cannot fake (see `fire_cost`).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from fire_cost_bodies import APP_NAME, BODY_MODES, body_module, counted_postgres
from fire_cost_servers import Server, adapter_lock, private_server, provider_env
from firefly_scheduling.fires.claims import claim_name
from firefly_scheduling.locks.port_holdings import claiming_lock
from fleet_nodes import TASK, TASK_MODULE  # the same no-op bodies and witness lines as the fleet

#: The hog's claims outlive every window a node computes (grace 60 s + skew 5 s).
HOG_CLAIM_SECONDS = 90.0


@dataclass
class Measure:
    backend: str
    mode: str
    attempts: int
    expected: int
    cpu: float
    evidence: str
    commands: int | None
    hog_late: int
    stolen: int
    #: Body modes: statements sent on the wire in the window, by the task's
    #: connections and by the node's own (`fire_cost_bodies`).
    task_statements: int | None = None
    node_statements: int | None = None
    #: Body modes: the task's transactions ended in the window, by statements held.
    task_transactions: dict[int, int] | None = None

    @property
    def ms_per_attempt(self) -> float:
        return self.cpu * 1000 / max(self.attempts, 1)

    @property
    def commands_per_attempt(self) -> float | None:
        return None if self.commands is None else self.commands / max(self.attempts, 1)


class Hog:
    """Claims every fire of `targets` at `instant - lead` seconds, from `start` on.

    The lead leaves a loaded SQL server time for T claims before the node's own.
    """

    def __init__(self, lock: Any, targets: list[str], start: int, lead: float = 1.5) -> None:
        self.claims = claiming_lock(lock)
        self.targets = targets
        self.next = start
        self.lead = lead
        self.won: dict[int, int] = {}
        self.late: dict[int, int] = {}
        #: When each claim was sent: the server counters see them by time.
        self.sent: list[float] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def sent_between(self, start: float, end: float) -> int:
        return sum(1 for at in self.sent if start <= at < end)

    def stop(self) -> None:
        self.done.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.done.is_set():
            if self.done.wait(max(self.next - self.lead - time.time(), 0)):
                return
            second = self.next
            instant = datetime.fromtimestamp(second, UTC)
            won = 0
            for target in self.targets:
                if self.done.is_set():
                    return
                self.sent.append(time.time())
                if self.claims.try_claim(claim_name(target, target, instant), HOG_CLAIM_SECONDS):
                    won += 1
            self.won[second] = won
            self.late[second] = int(time.time() > second)  # the node may have come first
            self.next += 1


def measure(
    backend: str, mode: str, tasks: int, seconds: int, warmup: int, profile: Path | None
) -> Measure:
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fire-cost-")))
        server = stack.enter_context(private_server(backend))
        module = f"fire_cost_tasks_{os.getpid()}_{int(time.time())}"
        if mode in BODY_MODES:
            text = body_module(tasks, mode)
        else:
            text = TASK_MODULE.format(tasks=tasks) + "".join(
                TASK.format(index=i) for i in range(tasks)
            )
        (scratch / f"{module}.py").write_text(text)
        targets = [f"{module}:task_{i}" for i in range(tasks)]
        witness = scratch / "witness.log"
        provider = provider_env(backend, scratch, server)
        counter = None
        if mode in BODY_MODES:
            through, counter = stack.enter_context(counted_postgres(provider))
            provider = {**provider, **through}
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("FIREFLY_SCHEDULING_")},
            **provider,
            "FLEET_WITNESS": str(witness),
            "PYTHONPATH": str(scratch),
        }
        executable = str(Path(sys.executable).parent / "firefly-scheduling")
        err = (scratch / "node.err").open("w")
        stack.callback(err.close)
        node = subprocess.Popen(
            [
                executable,
                "run",
                "--app",
                module,
                "--node",
                f"cost-{mode}",
                "--log-level",
                "WARNING",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        stack.callback(_stop, node)
        _wait_for(lambda: witness.exists() and witness.stat().st_size > 0, node, scratch)
        hog = None
        if mode == "lose":
            lock = adapter_lock(provider)
            stack.callback(_close, lock)
            hog = Hog(lock, targets, math.ceil(time.time()) + 1)
            hog.thread.start()
            stack.callback(hog.stop)
        time.sleep(warmup)
        if node.poll() is not None:
            raise RuntimeError(f"the node exited: {(scratch / 'node.err').read_text()[-2000:]}")
        # The window runs from 0.3 s past a second to 0.3 s past a later one: the node's
        # burst of fires is over by then, the hog's next one (at .5) not started.
        first = math.ceil(time.time()) + 1
        fires = range(first, first + seconds)
        handle = psutil.Process(node.pid)
        _sleep_until(first - 0.7)
        spy = _py_spy(node.pid, seconds, profile, backend, mode) if profile else None
        window_start = time.time()
        cpu_before, claims_before, commands_before = _sample(handle, server)
        statements_before = counter.counts() if counter is not None else None
        transactions_before = counter.transactions() if counter is not None else None
        _sleep_until(first + seconds - 0.7)
        cpu_after, claims_after, commands_after = _sample(handle, server)
        statements_after = counter.counts() if counter is not None else None
        transactions_after = counter.transactions() if counter is not None else None
        window_end = time.time()
        if spy is not None:
            spy.wait()
        time.sleep(1.5)
        evidence, attempts, commands, hog_late, stolen = "", 0, None, 0, 0
        task_statements = node_statements = None
        if statements_before is not None and statements_after is not None:
            sent = statements_after - statements_before
            task_statements = sent[APP_NAME]
            node_statements = sum(sent.values()) - task_statements
        task_transactions = None
        if transactions_before is not None and transactions_after is not None:
            ended = transactions_after - transactions_before
            task_transactions = {
                size: count for (name, size), count in sorted(ended.items()) if name == APP_NAME
            }
        if mode == "win" or mode in BODY_MODES:
            attempts = _witnessed(witness, fires)
            evidence = "witness lines"
            if commands_before is not None and commands_after is not None:
                commands = commands_after - commands_before
        else:
            assert hog is not None
            hog.stop()
            hog_late = sum(hog.late.get(second, 0) for second in fires)
            hog_sent = hog.sent_between(window_start, window_end)
            if claims_before is not None and claims_after is not None:
                attempts = claims_after - claims_before - hog_sent
                evidence = "server counter - hog claims"
            else:
                skipped = _skipped_by_node(provider, targets, fires, f"cost-{mode}")
                attempts = tasks * seconds - skipped
                evidence = "fires - node's skip records"
            if commands_before is not None and commands_after is not None:
                commands = commands_after - commands_before - hog_sent
            # Fires the node won because the hog came late: counted, and shown.
            stolen = _witnessed(witness, fires)
        return Measure(
            backend,
            mode,
            attempts,
            tasks * seconds,
            cpu_after - cpu_before,
            evidence,
            commands,
            hog_late,
            stolen,
            task_statements,
            node_statements,
            task_transactions,
        )


def _sample(handle: psutil.Process, server: Server) -> tuple[float, int | None, int | None]:
    times = handle.cpu_times()
    return (
        float(times.user + times.system),
        server.claims() if server.claims else None,
        server.commands() if server.commands else None,
    )


def _sleep_until(wall: float) -> None:
    time.sleep(max(wall - time.time(), 0))


def _witnessed(witness: Path, fires: range) -> int:
    if not witness.exists():
        return 0
    return sum(
        1 for line in witness.read_text().splitlines() if round(float(line.split()[1])) in fires
    )


def _skipped_by_node(env: dict[str, str], targets: list[str], fires: range, node: str) -> int:
    """Fires of the window the node recorded as skipped (passed over, too late...):
    a fire it did not attempt; one it lost leaves nothing, one it won a run."""
    from firefly_scheduling.history.port import RunState  # noqa: PLC0415
    from firefly_scheduling.history.selection import resolve_history  # noqa: PLC0415
    from firefly_scheduling.settings import Settings  # noqa: PLC0415

    history = resolve_history(Settings.from_env(env))
    if history is None:
        raise RuntimeError("no run history to count the node's passed-over fires with")
    try:
        recorded = 0
        for target in targets:
            for record in history.runs(target, limit=len(fires) + 20):
                second = round(record.instant.timestamp())
                if second in fires and record.node == node and record.state is RunState.SKIPPED:
                    recorded += 1
        return recorded
    finally:
        history.close()


def _py_spy(
    pid: int, seconds: int, directory: Path, backend: str, mode: str
) -> subprocess.Popen[bytes]:
    directory.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen(
        [
            *(spy, "record", "--pid", str(pid), "--duration", str(seconds), "--rate", "250"),
            *("--format", "raw", "--threads", "--gil"),
            *("-o", str(directory / f"{backend}-{mode}.txt")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _wait_for(ready: Callable[[], bool], node: subprocess.Popen[bytes], scratch: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if ready():
            return
        if node.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f"the node did not come up: {(scratch / 'node.err').read_text()[-2000:]}")


def _stop(node: subprocess.Popen[bytes]) -> None:
    node.terminate()
    try:
        node.wait(timeout=60)
    except subprocess.TimeoutExpired:
        node.kill()
        node.wait()


def _close(lock: Any) -> None:
    close = getattr(lock, "close", None)
    if callable(close):
        close()
