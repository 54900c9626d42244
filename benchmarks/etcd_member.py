"""An etcd member of the benchmark's own, with its data on tmpfs; and etcd's disk syncs.

Every etcd write is a Raft entry, and a member syncs its write-ahead log to disk
(`fdatasync`) before it applies the entry and answers: a release and the next
holder's take are two syncs of the member's disk. Where that disk is slow now and
then, the slow syncs, not the client, make the tail of an etcd wake-up. To tell
the two apart the waiting benchmark measures, in the same run, the member of
`FIREFLY_TEST_ETCD_URL` (its data on the machine's disk) and a throwaway member
started here whose data directory is on tmpfs, as a dedicated fast disk would
behave, and reads each member's own histogram of its log syncs
(`etcd_disk_wal_fsync_duration_seconds` at `/metrics`) before and after.

A member on tmpfs keeps nothing across a crash of the machine: it is a measuring
device, never a way to run etcd.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil

#: etcd's histogram of its write-ahead log's syncs, in seconds.
WAL_FSYNC = "etcd_disk_wal_fsync_duration_seconds"
#: A sync slower than this is counted as slow (one of the histogram's bucket bounds).
SLOW_SYNC_SECONDS = 0.008


@dataclass(frozen=True)
class Syncs:
    """A member's log syncs so far: how many, and per bucket bound (seconds) how many
    took at most that long (cumulative, as etcd reports them)."""

    count: int
    at_most: dict[float, int]

    def since(self, earlier: Syncs) -> Syncs:
        return Syncs(
            self.count - earlier.count,
            {bound: n - earlier.at_most.get(bound, 0) for bound, n in self.at_most.items()},
        )

    def slow(self) -> int:
        """The syncs slower than `SLOW_SYNC_SECONDS`."""
        return self.count - self.at_most.get(SLOW_SYNC_SECONDS, 0)

    def slowest_bound(self) -> float | None:
        """The smallest bucket bound every sync fitted under (seconds); None if none."""
        fitting = [bound for bound, n in self.at_most.items() if n >= self.count]
        return min(fitting) if self.count and fitting else None


def wal_syncs(url: str) -> Syncs:
    """The log syncs the member of `url` (`etcd://host:port`) has made since it started."""
    parts = urlsplit(url)
    address = f"http://{parts.hostname or '127.0.0.1'}:{parts.port or 2379}/metrics"
    with urllib.request.urlopen(address, timeout=5) as answer:
        text = answer.read().decode()
    count, at_most = 0, {}
    for line in text.splitlines():
        if line.startswith(f"{WAL_FSYNC}_count "):
            count = int(float(line.split()[1]))
        elif line.startswith(f'{WAL_FSYNC}_bucket{{le="') and "+Inf" not in line:
            bound = float(line.split('"')[1])
            at_most[bound] = int(float(line.split()[1]))
    return Syncs(count, at_most)


def tmpfs_folder() -> Path | None:
    """The writable tmpfs mount with the most room, where a throwaway member's data
    goes; None when the machine has none."""
    best: tuple[int, Path] | None = None
    for partition in psutil.disk_partitions(all=True):
        if partition.fstype != "tmpfs" or "ro" in partition.opts.split(","):
            continue
        folder = Path(partition.mountpoint)
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            continue
        if free >= 1 << 30 and (best is None or free > best[0]):
            best = (free, folder)
    return None if best is None else best[1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _healthy(client: int) -> bool:
    try:
        address = f"http://127.0.0.1:{client}/health"
        with urllib.request.urlopen(address, timeout=1) as answer:
            return b'"health":"true"' in answer.read()
    except OSError:
        return False


@contextlib.contextmanager
def member_on_tmpfs() -> Iterator[str]:
    """Start a one-member etcd (the `etcd` on PATH) with its data on tmpfs, on free
    loopback ports; yield its `etcd://` URL; stop it and delete its data after.

    `RuntimeError` when there is no `etcd` binary, no tmpfs, or no leader in 30 s.
    """
    binary = shutil.which("etcd")
    folder = tmpfs_folder()
    if binary is None or folder is None:
        raise RuntimeError("an etcd member on tmpfs needs the etcd binary on PATH and a tmpfs")
    data = Path(tempfile.mkdtemp(prefix="firefly-bench-etcd-", dir=folder))
    client, peer = _free_port(), _free_port()
    with (data / "etcd.log").open("wb") as log:
        process = subprocess.Popen(
            [
                binary,
                "--name",
                "bench",
                "--data-dir",
                str(data / "member"),
                "--listen-client-urls",
                f"http://127.0.0.1:{client}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{client}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-cluster",
                f"bench=http://127.0.0.1:{peer}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while not _healthy(client):
            if process.poll() is not None or time.monotonic() > deadline:
                said = (data / "etcd.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the etcd member on tmpfs did not start:\n{said}")
            time.sleep(0.2)
        yield f"etcd://127.0.0.1:{client}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(data, ignore_errors=True)
