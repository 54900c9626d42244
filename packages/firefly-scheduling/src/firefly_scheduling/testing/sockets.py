"""Count a process's TCP connections to a server, from the kernel's tables (Linux).

Evidence for connection bounds that the code under test cannot fake: the sockets a
process holds are read from `/proc/<pid>/fd` (each socket is `socket:[inode]`) and
matched against `/proc/<pid>/net/tcp` and `tcp6`, whose rows give each socket's remote
port. `PeakConnections` samples that count on a thread while a test loads a lock,
and keeps the largest value seen, per server port, of the sockets opened inside its
block: a connection an earlier test left to the garbage collector is not the code
under test's (one such made a cluster bound read 5 of 4 in CI).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Collection
from pathlib import Path
from types import TracebackType

#: Rows of /proc/net/tcp in the LISTEN state (0A) are servers, not connections.
_LISTEN = "0A"


def tcp_connections(
    pid: int, ports: Collection[int], *, excluding: Collection[str] = ()
) -> dict[int, int]:
    """How many TCP sockets process `pid` holds to each remote port in `ports`.

    `excluding`: socket inodes not to count (those open before, from `socket_inodes`).
    """
    inodes = socket_inodes(pid).difference(excluding)
    counts = dict.fromkeys(ports, 0)
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            port = int(remote.rpartition(":")[2], 16)
            if state != _LISTEN and port in counts and inode in inodes:
                counts[port] += 1
    return counts


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process `pid` holds now."""
    inodes = set()
    fds = f"/proc/{pid}/fd"
    for fd in os.listdir(fds):
        try:
            target = os.readlink(f"{fds}/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


class PeakConnections:
    """The most connections `pid` opened to each of `ports` and held at once in the block.

    Samples every `interval` seconds on a daemon thread (and once at the end), so a
    burst shorter than the interval can be missed; loads meant to be measured run
    for seconds.
    """

    def __init__(self, ports: Collection[int], *, pid: int | None = None, interval: float = 0.01):
        self.pid = os.getpid() if pid is None else pid
        self.ports = tuple(ports)
        self.interval = interval
        self.peak = dict.fromkeys(self.ports, 0)
        self._before: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)

    def __enter__(self) -> PeakConnections:
        self._before = socket_inodes(self.pid)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def total(self) -> int:
        """The largest per-port peaks, summed (an upper bound of the peak total)."""
        return sum(self.peak.values())

    def _sample_until_stopped(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval)

    def _sample(self) -> None:
        counts = tcp_connections(self.pid, self.ports, excluding=self._before)
        for port, count in counts.items():
            self.peak[port] = max(self.peak[port], count)
