"""Per-fire CPU cost of a resident node: a fire it loses, and a fire it runs.

The measured node is a real `firefly-scheduling run` process (the resident host,
the configured provider, its default run history, no fire log) on a generated module
of T locked `fixed_rate="1s"` no-op tasks; its CPU time (user + system, read from
outside through psutil) over a window of whole seconds is divided by the fire
attempts in that window, counted from evidence the node cannot fake:

* **lose**: a "hog" (a thread of this script, with the adapter's own lock) claims
  every fire of the window through `try_claim` 1.5 s before its instant, so every
  attempt of the node loses the claim. The node's attempts are counted on the
  server where the script starts a private one (redis, memcached: the server's own
  command counters, minus the hog's claims sent in the window); on the SQL backends
  they are the window's fires minus the ones the node's run history records as
  skipped (passed over or too late: a fire a node does not attempt is recorded by
  the guarantee). Fires the node still won (the hog came late) count as attempts
  and are shown.
* **win**: the node alone runs every fire; its attempts are the bodies' witness
  lines (one `O_APPEND` write per body, with the fire's instant).

Beside each, the CPU per claim of the raw driver sending the same claim (the
statement of `benchmarks/claims.py`, one connection, this process, a sequential
loop), lost and won, so the ratio says how much of the node's cost is the driver's
own round trip. Where the script runs a private server it also reports the server
commands per attempt (the round trips a fire costs).

Each (backend, mode) runs `--runs` times, lose and win alternating; a row gives the
median and the range. The machine this runs on should be quiet: on a shared one,
the figures are indications. The table also goes to `docs/results/fire_cost.md`
and `fire_cost.json` (see `benchmark_results`).

    uv run python benchmarks/fire_cost.py [--backends redis postgres ...] [--tasks 200]
        [--seconds 15] [--runs 3] [--warmup 3]      # every backend by default
    uv run python benchmarks/fire_cost.py --backends redis --modes win
        --profile-dir fire-profiles   # py-spy collapsed stacks of the node, no figures

`--profile-dir` samples the node with py-spy (`pip install py-spy`, not a project
dependency) over the window instead of measuring it (py-spy's pauses would count).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from benchmark_results import Run, Table, add_arguments, servers_of, shorten, spread, summary
from firefly_scheduling.fires.claims import claim_name
from firefly_scheduling.locks.port_holdings import claiming_lock
from fleet import TASK, TASK_MODULE  # the same no-op bodies and witness lines as the fleet

BACKENDS = ("redis", "memcached", "postgres", "database-postgres")
#: Every backend the node can run on here (`fleet.backend_env`'s names).
KNOWN_BACKENDS = (
    *("redis", "redis-cluster", "memcached", "etcd", "postgres", "mysql"),
    *("database-postgres", "database-mysql", "database-sqlite"),
)
#: The raw driver's claim of `benchmarks/claims.py`, by this script's backend name;
#: absent: none there (Redis Cluster), the raw columns then read "-".
RAW_CLAIMS = {
    **{name: name for name in ("redis", "memcached", "etcd", "postgres", "mysql")},
    "database-postgres": "database-postgres",
    "database-mysql": "database-mariadb",
    "database-sqlite": "database-sqlite",
}
#: Backends whose lost attempts cannot be counted: no run history to read the
#: passed-over fires from, and no private server of this script to count commands on.
LOSE_UNCOUNTED = ("etcd", "redis-cluster")
MODES = ("lose", "win")
#: The hog's claims outlive every window a node computes (grace 60 s + skew 5 s).
HOG_CLAIM_SECONDS = 90.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- private servers: exact command counts ----------------------------------------------


@dataclass
class Server:
    """The URL the node uses, and the server's command counters (None: not counted)."""

    url: str | None  # None: the shared server of `FIREFLY_TEST_*_URL`
    claims: Callable[[], int] | None = None
    commands: Callable[[], int] | None = None


@contextmanager
def private_server(backend: str) -> Iterator[Server]:
    """A server of this script's own where its counters are cheap to read, else none."""
    if backend == "redis" and shutil.which("redis-server"):
        port = free_port()
        process = subprocess.Popen(
            [
                *("redis-server", "--port", str(port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no"),
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            import redis  # noqa: PLC0415

            client = redis.Redis(port=port)
            _wait(lambda: bool(client.ping()))

            def stats() -> dict[str, Any]:
                return dict(client.info("commandstats"))

            def claims() -> int:
                return int(stats().get("cmdstat_set", {}).get("calls", 0))

            def commands() -> int:
                # Minus the INFO calls that read the counters.
                every = stats()
                total = sum(int(v["calls"]) for v in every.values())
                return total - int(every.get("cmdstat_info", {}).get("calls", 0))

            yield Server(f"redis://127.0.0.1:{port}/0", claims, commands)
            client.close()
        finally:
            process.terminate()
            process.wait()
    elif backend == "memcached" and shutil.which("memcached"):
        port = free_port()
        user = ["-u", "root"] if os.geteuid() == 0 else []
        process = subprocess.Popen(
            ["memcached", "-l", "127.0.0.1", "-p", str(port), "-m", "64", *user]
        )
        try:
            _wait(lambda: _memcached_stats(port) is not None)

            def memcached_claims() -> int:
                return int((_memcached_stats(port) or {})["cmd_set"])  # `add` counts here

            def memcached_commands() -> int:
                stats = _memcached_stats(port) or {}
                keys = (
                    *("cmd_get", "cmd_set", "cmd_touch", "delete_hits", "delete_misses"),
                    *("incr_hits", "incr_misses", "cas_hits", "cas_misses", "cas_badval"),
                )
                return sum(int(stats.get(key, 0)) for key in keys)

            yield Server(f"memcached://127.0.0.1:{port}", memcached_claims, memcached_commands)
        finally:
            process.terminate()
            process.wait()
    else:
        yield Server(None)


def _memcached_stats(port: int) -> dict[str, str] | None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as connection:
            connection.sendall(b"stats\r\n")
            data = b""
            while not data.endswith(b"END\r\n"):
                chunk = connection.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    return {
        parts[1]: parts[2]
        for parts in (line.split() for line in data.decode().splitlines())
        if len(parts) == 3 and parts[0] == "STAT"
    }


def _wait(ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.1)
    raise RuntimeError("the private server did not come up")


# -- the provider environment ---------------------------------------------------------------


def provider_env(backend: str, scratch: Path, server: Server) -> dict[str, str]:
    from fleet import backend_env, migrate  # noqa: PLC0415 - the same table as the fleet

    env, _ = backend_env(backend, scratch)
    if server.url is not None:
        name = next(key for key in env if key.endswith("_URL"))
        env[name] = server.url
    if backend.startswith("database"):
        migrate(env)
    return env


def adapter_lock(env: dict[str, str]) -> Any:
    """The node's lock, built from the same provider settings (for the hog)."""
    from firefly_scheduling.locks.providers import resolve_lock  # noqa: PLC0415
    from firefly_scheduling.settings import Settings  # noqa: PLC0415

    return resolve_lock(Settings.from_env(env))


# -- one measurement -----------------------------------------------------------------------


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
        (scratch / f"{module}.py").write_text(
            TASK_MODULE.format(tasks=tasks) + "".join(TASK.format(index=i) for i in range(tasks))
        )
        targets = [f"{module}:task_{i}" for i in range(tasks)]
        witness = scratch / "witness.log"
        provider = provider_env(backend, scratch, server)
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
        _sleep_until(first + seconds - 0.7)
        cpu_after, claims_after, commands_after = _sample(handle, server)
        window_end = time.time()
        if spy is not None:
            spy.wait()
        time.sleep(1.5)
        evidence, attempts, commands, hog_late, stolen = "", 0, None, 0, 0
        if mode == "win":
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


# -- the raw driver --------------------------------------------------------------------


def raw_cost(backend: str, count: int = 2000) -> tuple[float, float]:
    """CPU ms per lost and per won claim of the raw driver (this process, one thread);
    NaN where `benchmarks/claims.py` has no raw driver for the backend."""
    if backend not in RAW_CLAIMS:
        return math.nan, math.nan
    os.environ["FIREFLY_BENCH_CLAIM_SECONDS"] = str(HOG_CLAIM_SECONDS)
    from claims import raw_claims  # noqa: PLC0415 - the same statements as the claims bench

    with ExitStack() as stack, private_server(backend) as server:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="fire-cost-raw-"))
        if server.url is not None:
            # `claims` reads its URLs when imported; point it at the private server.
            import claims  # noqa: PLC0415

            setattr(claims, backend.upper(), server.url)
        claim = raw_claims(stack, RAW_CLAIMS[backend], str(Path(scratch) / "raw.sqlite"))()
        prefix = f"fire-cost-raw-{os.getpid()}-{time.time_ns()}"
        taken = claim_name(prefix, prefix, datetime.now(UTC))
        if not claim(taken):
            raise RuntimeError("the raw driver could not take its first claim")
        for _ in range(100):  # warm the connection and the statement
            claim(taken)
        started = time.process_time()
        for _ in range(count):
            if claim(taken):
                raise RuntimeError("a raw claim of a taken name won")
        lose = time.process_time() - started
        names = [
            claim_name(f"{prefix}.{i}", f"{prefix}.{i}", datetime.now(UTC)) for i in range(count)
        ]
        started = time.process_time()
        for name in names:
            if not claim(name):
                raise RuntimeError("a raw claim of a fresh name lost")
        win = time.process_time() - started
    return lose * 1000 / count, win * 1000 / count


# -- the report ------------------------------------------------------------------------------

#: CPU ms per attempt a node should stay within: a lost fire, a won fire.
TARGETS = {"lose": 0.25, "win": 0.75}

COLUMNS = [
    "backend",
    "mode",
    "CPU ms per attempt, median (range)",
    "target",
    "attempts per run",
    "evidence",
    "server commands per attempt",
    "raw driver ms per claim",
    "node / raw",
]


def figures(results: list[Measure], raw: list[float]) -> dict[str, Any]:
    """One (backend, mode) row, machine-readable."""
    first = results[0]
    costs = [r.ms_per_attempt for r in results]
    commands = [c for r in results if (c := r.commands_per_attempt) is not None]
    raw_ms = statistics.median(raw) if raw else math.nan
    finite_raw = not math.isnan(raw_ms)
    return {
        "backend": first.backend,
        "mode": first.mode,
        "cpu_ms_per_attempt": summary(costs),
        "target_ms": TARGETS[first.mode],
        "target_met": statistics.median(costs) <= TARGETS[first.mode],
        "attempts": [r.attempts for r in results],
        "expected_attempts": first.expected,
        "evidence": first.evidence,
        "hog_late_seconds": sum(r.hog_late for r in results),
        "fires_the_node_won": sum(r.stolen for r in results),
        "server_commands_per_attempt": statistics.median(commands) if commands else None,
        "raw_ms_per_claim": raw_ms if finite_raw else None,
        "node_over_raw": statistics.median(costs) / raw_ms if finite_raw else None,
    }


def row(figure: dict[str, Any]) -> list[str]:
    evidence = figure["evidence"]
    if figure["hog_late_seconds"]:
        evidence += f" (hog late {figure['hog_late_seconds']} s)"
    if figure["fires_the_node_won"]:
        evidence += f" (the node won {figure['fires_the_node_won']})"
    commands = figure["server_commands_per_attempt"]
    raw, ratio = figure["raw_ms_per_claim"], figure["node_over_raw"]
    met = "met" if figure["target_met"] else "**not met**"
    return [
        figure["backend"],
        figure["mode"],
        spread(_costs(figure)),
        f"≤ {figure['target_ms']}: {met}",
        f"{'/'.join(map(str, figure['attempts']))} (of {figure['expected_attempts']})",
        evidence,
        "-" if commands is None else f"{commands:.2f}",
        "-" if raw is None else f"{raw:.3f}",
        "-" if ratio is None else f"{ratio:.1f}",
    ]


def _costs(figure: dict[str, Any]) -> list[float]:
    cost = figure["cpu_ms_per_attempt"]
    if cost["runs"] == 1:
        return [cost["median"]]
    return [cost["min"], cost["median"], cost["max"]]


def modes_of(backend: str, modes: list[str], explicit: bool) -> list[str]:
    """The modes measured on `backend`: a lost attempt is countable on most backends only."""
    if explicit or backend not in LOSE_UNCOUNTED:
        return modes
    return [mode for mode in modes if mode != "lose"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backends",
        nargs="+",
        default=list(KNOWN_BACKENDS),
        choices=KNOWN_BACKENDS,
        metavar="BACKEND",
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        default=None,
        choices=MODES,
        help="default: lose and win, win alone where a lost attempt cannot be counted",
    )
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile-dir", type=Path)
    add_arguments(parser)
    args = parser.parse_args()
    shorten(args, parser, seconds=3, warmup=1, runs=1, tasks=50)
    explicit = args.modes is not None
    modes = args.modes or list(MODES)
    if explicit and "lose" in modes and (bare := sorted(set(args.backends) & set(LOSE_UNCOUNTED))):
        parser.error(
            f"--modes lose counts a node's attempts on a private server (redis, memcached) "
            f"or in its run history, and {bare} have neither: measure them with --modes win"
        )
    print(f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.1f}, ")
    print(f"# {args.tasks} tasks, {args.seconds} s windows, {args.runs} runs\n")
    if args.profile_dir:
        for backend in args.backends:
            for mode in modes_of(backend, modes, explicit):
                measure(backend, mode, args.tasks, args.seconds, args.warmup, args.profile_dir)
        print(f"py-spy stacks in {args.profile_dir}")
        return
    run = Run("fire_cost", args, parser, servers=servers_of(args.backends))
    table = Table("CPU per fire attempt of a resident node", COLUMNS, align="llllrlrrr")
    print("| " + " | ".join(COLUMNS) + " |")
    every: list[dict[str, Any]] = []
    for backend in args.backends:
        measured = modes_of(backend, modes, explicit)
        results: dict[str, list[Measure]] = {mode: [] for mode in measured}
        raw: dict[str, list[float]] = {"lose": [], "win": []}
        for _ in range(args.runs):
            for mode in measured:
                results[mode].append(
                    measure(backend, mode, args.tasks, args.seconds, args.warmup, None)
                )
            lose, win = raw_cost(backend)
            raw["lose"].append(lose)
            raw["win"].append(win)
        for mode in measured:
            figure = figures(results[mode], raw[mode])
            every.append(figure)
            table.rows.append(row(figure))
            print("| " + " | ".join(table.rows[-1]) + " |", flush=True)
    print(f"\n# load at the end {os.getloadavg()[0]:.1f}")
    run.write(
        "CPU per fire attempt",
        [table],
        every,
        notes=[
            f"A resident node with {args.tasks} locked one-second tasks; its CPU over "
            f"{args.seconds} s windows divided by its fire attempts, {args.runs} run(s) per row.",
            "lose: another client claimed every fire first; win: the node alone runs every fire.",
            "raw driver: the same claim sent by the bare driver in a loop (the statements of "
            "`benchmarks/claims.py`); node / raw compares the node's cost with it.",
        ],
    )


if __name__ == "__main__":
    main()
