"""One setup end to end: servers, proxies, nodes, nemesis, graceful stop, check, table."""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chaos_harness.checker import CheckReport, Violation, Window, check
from chaos_harness.cluster import ChaosNode, node_env, wait_booted
from chaos_harness.control_store import drop_run_table, run_control_store
from chaos_harness.effects_setup import check_effects, collect, load, node_variables, prepare
from chaos_harness.effects_tasks import schedules as effects_schedules
from chaos_harness.evidence import EvidenceLog, read_events
from chaos_harness.fleet_down import FleetDown
from chaos_harness.history import read_history
from chaos_harness.nemesis import Nemesis
from chaos_harness.policy_tasks import RATES as POLICY_RATES
from chaos_harness.policy_tasks import PolicyTargets, policy_targets
from chaos_harness.policy_tasks import schedules as policy_schedules
from chaos_harness.proxy import FaultyProxy
from chaos_harness.setups import VOLATILE_SERVERS, Backend, make_backend
from chaos_harness.steering_nemesis import STEERED, OperatorProcess, steering_kinds
from chaos_harness.tasks import schedules
from firefly_scheduling.settings import Settings

#: Seconds cut from the start of the run before fires are counted (boot, skew).
MARGIN_SECONDS = 5.0
#: Seconds cut from its end: a node of a loaded machine may come to a fire late, and
#: the stop must not catch fires no node has reached yet.
END_MARGIN_SECONDS = 10.0
#: How long the nodes may take to boot: minutes on a machine with a load of 100.
BOOT_SECONDS = 300.0
#: The whole fleet stays down this many periods of the catch-up task (`fleet_down`).
FLEET_DOWN_PERIODS = 2
#: Seconds the operator gets to finish its last commands once the faults end.
OPERATOR_SECONDS = 30.0
#: The shortest run that takes the whole fleet down: the nodes, booting again on a
#: loaded machine, must have time to catch up before the run stops. A shorter run
#: (the CI lane) catches up only the fires before its first boot.
FLEET_DOWN_MIN_SECONDS = 120.0


@dataclass
class SetupResult:
    setup: str
    seed: int
    seconds: float
    pace: float = 1.0
    fires: int = 0
    ran: int = 0
    body_runs: int = 0
    adoptions: int = 0
    fenced_overlaps: int = 0
    double_fault_reruns: int = 0
    late_zombie_bodies: int = 0
    #: Fires whose runs were compared with their history records (rule 4).
    recorded_fires: int = 0
    #: Runs of failed fires again, by their task's `retries=`.
    retries: int = 0
    #: What the policy rules saw of each policy (`CheckReport.policy`).
    policy: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    applicable: list[str] = field(default_factory=list)
    misses: dict[str, int] = field(default_factory=dict)
    violations: list[dict[str, object]] = field(default_factory=list)
    history_refusals: int = 0
    #: Injected history failures, by the write they failed (`start`, `finish`, ...).
    refused_writes: dict[str, int] = field(default_factory=dict)
    workdir: str = ""
    #: The effects setups' tables: effect rows, guarded writes made and refused.
    effects: dict[str, int] = field(default_factory=dict)
    #: What the steering rules saw (`CheckReport.steering`).
    steering: dict[str, int] = field(default_factory=dict)
    #: What the checker was given besides the files: to check a run again (`recheck`).
    checked: dict[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, base: SetupResult, report: CheckReport) -> SetupResult:
        base.fires, base.ran, base.body_runs = report.fires, report.ran, report.body_runs
        base.adoptions, base.fenced_overlaps = report.adoptions, report.fenced_overlaps
        base.double_fault_reruns = report.double_fault_reruns
        base.late_zombie_bodies = report.late_zombie_bodies
        base.recorded_fires = report.recorded_fires
        base.retries, base.policy = report.retries, dict(report.policy)
        base.steering = dict(sorted(report.steering.items()))
        base.misses = dict(report.misses.most_common())
        base.violations = [_violation(v) for v in report.violations]
        return base


def _violation(violation: Violation) -> dict[str, object]:
    return {"rule": violation.rule, "message": violation.message, "context": violation.context}


def run_setup(
    setup: str, seed: int, seconds: float, nodes: int, root: Path, pace: float = 1.0
) -> SetupResult:
    """Run `setup` for `seconds` of faults with `nodes` resident nodes and one `tick`."""
    workdir = root / setup
    workdir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{seed}:{setup}")
    evidence_path = workdir / "evidence.jsonl"
    evidence = EvidenceLog(evidence_path)
    backend = make_backend(setup, workdir)
    result = SetupResult(setup, seed, seconds, pace, workdir=str(workdir))
    # The history lives on tmpfs where there is one: SQLite's fsyncs on a loaded disk
    # would make every node late, which measures the disk, not the library.
    shm = Path("/dev/shm")
    history_dir = Path(tempfile.mkdtemp(prefix="firefly-chaos-", dir=shm if shm.is_dir() else None))
    history_path = history_dir / "history.db"
    cluster: list[ChaosNode] = []
    proxies: list[FaultyProxy] = []
    operator: OperatorProcess | None = None
    steering = bool(steering_kinds(backend))
    prefix = f"chaos-{uuid.uuid4().hex[:12]}"
    # The effects setups' tables live with their history: on the server, or in its file.
    home = backend.url if backend.proxied else f"sqlite:///{history_path}"
    try:
        if backend.effects:
            prepare(home, prefix)
        base_env = node_env(
            workdir,
            FIREFLY_SCHEDULING_LOCK_PROVIDER=backend.provider,
            FIREFLY_SCHEDULING_HISTORY_URL=f"sqlite:///{history_path}",
            FIREFLY_CHAOS_EVIDENCE=str(evidence_path),
            FIREFLY_CHAOS_PREFIX=prefix,
            FIREFLY_CHAOS_PACE=str(pace),
            FIREFLY_CHAOS_STEERING="1" if steering else "0",
        )
        url_variable = f"FIREFLY_SCHEDULING_LOCK_{backend.provider.upper()}_URL"
        names = [f"{setup}-n{i}" for i in range(1, nodes + 1)] + [f"{setup}-tick"]
        for name in names:
            proxy = FaultyProxy(*backend.target()).start() if backend.proxied else None
            if proxy is not None:
                proxies.append(proxy)
            url = backend.via(proxy.port) if proxy is not None else backend.url
            env = {**base_env, url_variable: url}
            if backend.effects:
                env |= node_variables(setup, url if backend.proxied else home)
            elif not with_policy_tasks():
                env["FIREFLY_CHAOS_APP"] = "chaos_harness.tasks"
            node = ChaosNode(
                name,
                "tick" if name.endswith("-tick") else "run",
                workdir,
                env,
                evidence,
                proxy=proxy,
                offset=round(rng.uniform(-2.0, 2.0), 3),
            )
            cluster.append(node)
            node.spawn()
        if not wait_booted(evidence_path, set(names), timeout=BOOT_SECONDS):
            raise RuntimeError(f"{setup}: the nodes did not boot; see {workdir}/*.out")
        if steering:  # the operator reaches the server directly, off the faulted network
            operator = OperatorProcess({**base_env, url_variable: backend.url}, workdir)
        nemesis = Nemesis(backend, cluster, evidence, rng, pace, operator)
        result.applicable = list(nemesis.kinds)
        wall, mono = datetime.now(UTC), time.monotonic_ns()
        started = time.monotonic()
        next_fault = started + 2.0
        fleet = FleetDown(
            cluster,
            evidence,
            at=started + seconds / 2 if seconds >= FLEET_DOWN_MIN_SECONDS else float("inf"),
            seconds=FLEET_DOWN_PERIODS * POLICY_RATES["caught_up"] * pace,
        )
        while time.monotonic() - started < seconds:
            nemesis.run_due()
            fleet.step(ready=all(nemesis.injected[kind] for kind in nemesis.kinds))
            for node in cluster:
                if node.host == "tick" and not node.alive and not node.paused and not fleet.active:
                    node.spawn()  # cron starts the next minute's tick
            if time.monotonic() >= next_fault and not fleet.active:
                nemesis.inject()
                next_fault = time.monotonic() + nemesis.pause_between()
            time.sleep(0.02)
        nemesis.heal()
        if operator is not None:
            operator.close(OPERATOR_SECONDS)
        # The window closes once every resident node is up again: a node that boots
        # records the fires nobody ran while it was down, and a loaded machine can
        # take many seconds to boot one. Then let the healed nodes settle.
        _until_residents_booted(cluster, BOOT_SECONDS)
        time.sleep(3.0)
        ended_wall = datetime.now(UTC)
        for node in cluster:
            node.terminate()
        for node in cluster:
            node.wait_stopped(30)
        ended = time.monotonic_ns()
        result.faults = dict(nemesis.injected)
        window = Window(
            start=wall + timedelta(seconds=MARGIN_SECONDS),
            end=ended_wall - timedelta(seconds=END_MARGIN_SECONDS),
            wall=wall,
            mono=mono,
        )
        events = read_events(evidence_path)
        refused = Counter(
            str(e["write"])
            for e in events
            if e["ev"] == "history_refused" and e.get("injected", True)
        )
        result.history_refusals = sum(refused.values())
        result.refused_writes = dict(refused)
        pending = _pending_backfills(backend, prefix) if steering else []
        result.checked = {
            "window": [window.start.isoformat(), window.end.isoformat()],
            "anchor": [window.wall.isoformat(), window.mono],
            "ended": ended,
            "steering": steering,
            "pending_backfills": pending,
        }
        if backend.effects:
            history, effects = collect(home, prefix, workdir)
        else:
            history, effects = read_history(history_path), None
        report = check(
            events,
            history,
            effects_schedules(pace) if backend.effects else _schedules(pace),
            window,
            ended,
            volatile_server=setup in VOLATILE_SERVERS,
            policies=None if backend.effects else _policy_targets(pace),
            steering=steering,
            pending_backfills=[(start, end) for start, end in pending],
        )
        if effects is not None:
            result.effects = check_effects(effects, history, report)
        return SetupResult.of(result, report)
    finally:
        if operator is not None:
            operator.close(0)
        for node in cluster:
            if node.alive:
                node.kill()
        for proxy in proxies:
            proxy.close()
        backend.close()
        evidence.close()
        if history_path.exists():
            shutil.copy(history_path, workdir / "history.db")
        shutil.rmtree(history_dir, ignore_errors=True)
        (workdir / "result.json").write_text(json.dumps(result.__dict__, default=str, indent=1))


def table(results: list[SetupResult]) -> str:
    """The per-backend table of the issue: fires, faults by kind, violations, misses."""
    kinds = sorted({kind for result in results for kind in result.faults})
    header = [
        "setup",
        "fires",
        "ran",
        "adopted",
        "fenced overlaps",
        "reruns after a double fault",
        "late zombie bodies",
        "runs checked in the history",
        "violations",
        "misses",
        "effect rows / guarded writes / refused",
        "steering",
    ]
    lines = [
        "| " + " | ".join(header + kinds) + " |",
        "|" + "---|" * (len(header) + len(kinds)),
    ]
    for r in results:
        misses = sum(r.misses.values())
        cells = [r.setup, r.fires, r.ran, r.adoptions, r.fenced_overlaps, r.double_fault_reruns]
        cells.append(r.late_zombie_bodies)
        cells.append(r.recorded_fires)
        cells.append(len(r.violations))
        cells.append(misses)
        cells.append(" / ".join(str(n) for n in r.effects.values()) if r.effects else "")
        cells.append(", ".join(f"{name}: {n}" for name, n in r.steering.items()))
        cells += [r.faults.get(kind, 0) if kind in r.applicable else "n/a" for kind in kinds]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    reasons: Counter[str] = Counter()
    for r in results:
        for reason, count in r.misses.items():
            reasons[f"{r.setup}: {reason}"] += count
    lines.append("")
    lines.append("Misses by recorded reason:")
    lines += [f"- {count}: {reason}" for reason, count in sorted(reasons.items())]
    return "\n".join(lines)


def recheck(workdir: Path) -> SetupResult:
    """Check a finished setup's directory again (after a change to the checker)."""
    saved = json.loads((workdir / "result.json").read_text())
    checked = saved["checked"]
    window = Window(
        start=datetime.fromisoformat(checked["window"][0]),
        end=datetime.fromisoformat(checked["window"][1]),
        wall=datetime.fromisoformat(checked["anchor"][0]),
        mono=int(checked["anchor"][1]),
    )
    result = SetupResult(**{key: value for key, value in saved.items() if key != "violations"})
    events = read_events(workdir / "evidence.jsonl")
    effects = None
    if (workdir / "effects.json").exists():
        history, effects = load(workdir)
    else:
        history = read_history(workdir / "history.db")
    report = check(
        events,
        history,
        effects_schedules(result.pace) if effects is not None else _schedules(result.pace),
        window,
        int(checked["ended"]),
        volatile_server=result.setup in VOLATILE_SERVERS,
        policies=None if effects is not None else _policy_targets(result.pace),
        steering=bool(checked.get("steering", False)),
        pending_backfills=[(start, end) for start, end in checked.get("pending_backfills", [])],
    )
    if effects is not None:
        result.effects = check_effects(effects, history, report)
    return SetupResult.of(result, report)


def _pending_backfills(backend: Backend, prefix: str) -> list[tuple[str, str]]:
    """The steered task's backfill windows still stored (a second client, direct), read
    from the run's own control table, which is then dropped (`control_store`)."""
    settings = Settings(lock_provider=backend.provider, lock_urls={backend.provider: backend.url})
    store = run_control_store(settings, prefix)
    try:
        return [(b.start.isoformat(), b.end.isoformat()) for b in store.backfills(STEERED)]
    finally:
        store.close()
        drop_run_table(settings, prefix)


def _until_residents_booted(cluster: list[ChaosNode], timeout: float) -> None:
    """Wait (bounded) until every resident node's current process has booted."""
    deadline = time.monotonic() + timeout
    residents = [node for node in cluster if node.host == "run"]
    while time.monotonic() < deadline and not all(node.booted for node in residents):
        time.sleep(0.1)


def with_policy_tasks() -> bool:
    """Whether the first task mix runs with the fire policies' tasks (`policy_tasks`):
    `FIREFLY_CHAOS_POLICY_TASKS=0` leaves them out, to tell a finding of theirs from
    one of the first mix."""
    return os.environ.get("FIREFLY_CHAOS_POLICY_TASKS", "1") != "0"


def _schedules(pace: float) -> dict[str, float]:
    """The fires the checker expects of the first task mix, with the policies' tasks."""
    return schedules(pace) | (policy_schedules(pace) if with_policy_tasks() else {})


def _policy_targets(pace: float) -> PolicyTargets | None:
    return policy_targets(pace) if with_policy_tasks() else None
