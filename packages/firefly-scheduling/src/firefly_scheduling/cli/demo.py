"""`firefly-scheduling demo`: several local nodes racing for the demo app's tasks.

It needs no server and no checkout: the app it runs by default,
`firefly_scheduling.demo_app`, ships in the package. The nodes are real OS
processes, each running the resident host (`firefly-scheduling run`) on that app,
sharing an embedded SQLite file through the `database` lock provider (so
`firefly-scheduling[database]` must be installed: without it the demo says so and
exits 2); the lock, run-history and anchor tables are created first. Each node
appends every fire it handled to a shared fire log. The demo follows it and prints
one line per fire once every node has reported on it (or a moment later): which
node ran it, and each other node's verdict in the fire runner's words (claimed
elsewhere, too late, overlapping, held back...). When the time is up (counted from
the first fire any node reports, so booting does not eat it) it stops the nodes with
SIGTERM and prints per task the fires, the runs, the duplicates (runs
beyond one per fire of a locked task, which must be 0) and why the other nodes did
not run it. Unlocked tasks run on every node by design and are shown for contrast.

Exit status: 0; 1 when a locked task ran twice for one fire or a node failed (its
log is then kept, and its path and last lines printed); 2 for a configuration error.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console

from firefly_scheduling.cli.demo_report import FireFeed, TaskTally, print_summary
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.selection import resolve_history
from firefly_scheduling.hosts.observation.fire_log import read_fire_log
from firefly_scheduling.initial_delay.selection import resolve_anchor_store
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling.providers import LockProvider
from firefly_scheduling.providers.install_hints import KNOWN_PROVIDERS
from firefly_scheduling.providers.registry import installed_providers
from firefly_scheduling.settings import Settings, env_var

# `python -c` rather than the console script: the node runs with exactly this
# interpreter, wherever (or whether) the script was installed.
_NODE_COMMAND = "import sys; from firefly_scheduling.cli import main; sys.exit(main())"
_POLL_SECONDS = 0.2
_NODE_GRACE_SECONDS = 5.0
_STOP_TIMEOUT_SECONDS = 20.0
_PIPE_WIDTH = 140
DEMO_APP = "firefly_scheduling.demo_app"
# The longest the race waits for a first fire before its clock starts anyway.
_BOOT_ALLOWANCE_SECONDS = 30.0
# The last lines of a failed node's log shown under the summary (the whole log is kept).
_LOG_TAIL_LINES = 5


@click.command()
@click.option("--nodes", type=click.IntRange(1, 16), default=3, show_default=True)
@click.option(
    "--seconds",
    type=click.FloatRange(min=2),
    default=20.0,
    show_default=True,
    help="How long the race runs, counted from the first fire any node reports.",
)
@click.option("--app", default=DEMO_APP, show_default=True, help="Package to run.")
@click.option(
    "--path",
    "import_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory to put on the nodes' import path, for an --app that is not installed.",
)
@click.option("--keep", is_flag=True, help="Keep the working directory (lock file, logs).")
def demo(*, nodes: int, seconds: float, app: str, import_path: Path | None, keep: bool) -> None:
    """Race N local node processes for the demo app's tasks; no server needed."""
    provider, file_url = demo_provider(installed_providers())
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = _PIPE_WIDTH  # a pipe has no width; 80 columns would fold every line
    workdir = Path(tempfile.mkdtemp(prefix="firefly-demo-"))
    failed: list[NodeExit] = []
    try:
        failed, duplicates = _run_demo(
            console,
            workdir,
            provider=provider,
            file_url=file_url,
            nodes=nodes,
            seconds=seconds,
            app=app,
            import_path=None if import_path is None else import_path.resolve(),
        )
    finally:
        # A failed node's log is the only account of why it failed: never delete it.
        if keep or failed:
            console.print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(0 if not failed and duplicates == 0 else 1)


def demo_provider(installed: Collection[LockProvider]) -> tuple[LockProvider, str]:
    """The installed provider whose lock the demo's nodes share through a local file.

    Its descriptor says it can, and how to address the file (`local_file_url`).
    Checked before anything is created, so without one the operator reads what to
    install, not a provider error about a variable they never set.
    """
    for provider in installed:
        if provider.local_file_url:
            return provider, provider.local_file_url
    extras = [hint.extra for hint in KNOWN_PROVIDERS.values() if hint.local_file]
    raise ConfigurationError(
        "the demo's nodes share a lock in a local file, and no installed lock provider "
        f"can keep one; install one with: pip install {' or '.join(repr(e) for e in extras)}"
    )


@dataclass(frozen=True)
class NodeExit:
    """How a node process ended; `signalled` says the demo itself sent it SIGTERM."""

    node: str
    code: int
    signalled: bool
    log: Path

    @property
    def failed(self) -> bool:
        """Failed on its own: SIGTERM's default action only means it was stopped while booting."""
        return self.code != 0 and not (self.signalled and self.code == -signal.SIGTERM)


def _run_demo(
    console: Console,
    workdir: Path,
    *,
    provider: LockProvider,
    file_url: str,
    nodes: int,
    seconds: float,
    app: str,
    import_path: Path | None,
) -> tuple[list[NodeExit], int]:
    """Run the race; return the nodes that failed and the duplicate runs of locked tasks."""
    shared_url = file_url.format(path=workdir / "demo.db")
    env = {
        **os.environ,
        env_var("firefly.scheduling.lock.provider"): provider.name,
        env_var(provider.url_key): shared_url,
        # The anchors go to the lock's own store: the same local file.
        env_var("firefly.scheduling.initial-delay.store"): "",
        "PYTHONUNBUFFERED": "1",
    }
    _install_tables(Settings.from_env(env))
    fire_log = workdir / "fires.jsonl"
    console.print(
        f"[bold]{nodes} node(s)[/] run [bold]{app}[/] for {seconds:g} s from the first fire, "
        f"sharing the lock file {shared_url}"
    )
    processes = {
        node: _start_node(
            node, app=app, import_path=import_path, fire_log=fire_log, workdir=workdir, env=env
        )
        for node in (f"node-{number}" for number in range(1, nodes + 1))
    }
    tallies: dict[str, TaskTally] = defaultdict(TaskTally)
    feed = FireFeed(console, nodes)
    offset = 0
    clock = RaceClock(seconds)
    try:
        while not clock.over(reported=bool(tallies)) and all(
            p.poll() is None for p in processes.values()
        ):
            time.sleep(_POLL_SECONDS)
            offset = _follow(feed, fire_log, offset, tallies)
    finally:
        exits = _stop(processes, workdir)
    _follow(feed, fire_log, offset, tallies)
    feed.flush(everything=True)
    print_summary(console, tallies, app)
    failed = [node for node in exits if node.failed]
    print_node_failures(console, failed)
    stopped = [node.node for node in exits if not node.failed and node.code != 0]
    if stopped:
        console.print(f"[yellow]stopped while still starting: {', '.join(stopped)}[/]")
    return failed, sum(t.duplicates for t in tallies.values() if t.locked)


class RaceClock:
    """When the race ends: `seconds` after the first fire any node reports.

    A node takes a few seconds to boot (imports, the scan, the scheduler), more on
    a loaded machine; counting from the start would spend a short race on booting.
    A node that never reports (an app whose tasks are not due) starts the clock
    after `boot_allowance` seconds anyway, so the demo always ends.
    """

    def __init__(
        self,
        seconds: float,
        boot_allowance: float = _BOOT_ALLOWANCE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._seconds = seconds
        self._clock = clock
        self._boot_deadline = clock() + boot_allowance
        self._deadline: float | None = None

    def over(self, *, reported: bool) -> bool:
        """Whether the race is over; `reported` says a node has reported a fire."""
        now = self._clock()
        if self._deadline is None and (reported or now >= self._boot_deadline):
            self._deadline = now + self._seconds
        return self._deadline is not None and now >= self._deadline


def print_node_failures(console: Console, failed: list[NodeExit]) -> None:
    """Each failed node's exit status, the path of its kept log and the log's last lines."""
    for node in failed:
        console.print(f"[red]{node.node} failed (exit {node.code}); its log: {node.log}[/]")
        tail = node.log.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
        for line in tail:
            console.print(f"  {line}", markup=False)


def _install_tables(settings: Settings) -> None:
    """Create the tables of the lock, the run history and the anchor store, once.

    What `firefly-scheduling migrate` does for a SQL backend, reached through the
    configured stores so core names no adapter; three nodes creating them at once
    on their first fire would only race for the file's write lock.
    """
    for build in (resolve_lock, resolve_history, resolve_anchor_store):
        store = build(settings)
        try:
            install = getattr(store, "install", None)
            if callable(install):
                install()
        finally:
            close = getattr(store, "close", None)
            if callable(close):
                close()


def _start_node(
    node: str,
    *,
    app: str,
    import_path: Path | None,
    fire_log: Path,
    workdir: Path,
    env: dict[str, str],
) -> subprocess.Popen[bytes]:
    arguments = ["run", "--app", app, "--node", node]
    if import_path is not None:
        arguments += ["--path", str(import_path)]
    arguments += ["--fire-log", str(fire_log), "--grace-period", str(_NODE_GRACE_SECONDS)]
    with _node_log(workdir, node).open("wb") as log:
        return subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
            [sys.executable, "-c", _NODE_COMMAND, *arguments],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _follow(feed: FireFeed, fire_log: Path, offset: int, tallies: dict[str, TaskTally]) -> int:
    records, offset = read_fire_log(fire_log, offset=offset)
    for record in records:
        tallies[record.target].add(record)
    feed.add(records)
    feed.flush()
    return offset


def _node_log(workdir: Path, node: str) -> Path:
    return workdir / f"{node}.log"


def _stop(processes: dict[str, subprocess.Popen[bytes]], workdir: Path) -> list[NodeExit]:
    """SIGTERM the nodes still running, wait for each, and say how each one ended."""
    signalled = set()
    for node, process in processes.items():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            signalled.add(node)
    exits = []
    for node, process in processes.items():
        try:
            code = process.wait(timeout=_STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        exits.append(NodeExit(node, code, node in signalled, _node_log(workdir, node)))
    return exits
