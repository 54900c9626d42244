"""The servers a chaos run may fault: its own Redis/memcached/etcd, and only its own SQL sessions.

Redis, memcached and etcd are private instances on free ports, with data under the
run's directory, so restarting them touches nobody else. etcd is a single member
(its default fsync on every commit), restarted by SIGKILL like Redis. Redis runs with an append-only
file fsynced on every write, the deployment `docs/backends/redis.md` asks of a
fleet relying on fencing; its restart is a SIGKILL (a crash), not a clean shutdown.

PostgreSQL and MariaDB are the shared servers: there the fault is ending a session,
and only sessions whose client port is one of this run's proxy connections are
ended (`pg_terminate_backend`, `KILL CONNECTION`), never anyone else's. On
PostgreSQL, whose sessions are processes of this machine, such a session can also
be frozen (`freeze_sessions`: SIGSTOP, then SIGCONT): a server that accepts every
segment and answers nothing, which only the client's reply deadline ends.
"""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pymysql


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing answers on 127.0.0.1:{port} after {timeout:g}s")


class PrivateServer:
    """A redis-server, memcached or etcd of this run only; `restart()` crashes and restarts it."""

    def __init__(self, kind: str, workdir: Path) -> None:
        self.kind = kind
        self.port = free_port()
        self._peer_port = free_port()  # etcd's, kept across restarts
        self.workdir = workdir / kind
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._process: subprocess.Popen[bytes] | None = None

    def _command(self) -> list[str]:
        if self.kind == "redis":
            return [
                "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.workdir), "--appendonly", "yes",
                "--appendfsync", "always", "--save", "", "--protected-mode", "no",
            ]  # fmt: skip
        if self.kind == "etcd":
            client, peer = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self._peer_port}"
            return [
                "etcd", "--name=chaos", f"--data-dir={self.workdir / 'data'}",
                f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=chaos={peer}",
            ]  # fmt: skip
        user = (
            ["-u", getpass.getuser()] if os.geteuid() == 0 else []
        )  # memcached refuses root without -u
        return ["memcached", "-l", "127.0.0.1", "-p", str(self.port), "-m", "64", "-U", "0", *user]

    def start(self) -> PrivateServer:
        log = (self.workdir / "server.log").open("ab")
        self._process = subprocess.Popen(
            self._command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir
        )
        if self._process.poll() is None:
            try:
                wait_port(self.port, timeout=30)
                if self.kind == "etcd":
                    _wait_for_leader(self.port)
                return self
            except RuntimeError:
                pass
        log_text = (self.workdir / "server.log").read_text(errors="replace")[-500:]
        raise RuntimeError(f"the private {self.kind} on port {self.port} did not start: {log_text}")

    def restart(self, when_down: Callable[[], object] = lambda: None) -> None:
        """SIGKILL the server and start it again; `when_down` runs once it is reaped.

        Between the two, every item a server that keeps nothing held is gone: the
        checker needs that instant, which comes before the new server accepts anyone.
        """
        self.stop(signal.SIGKILL)
        when_down()
        self.start()

    def stop(self, how: signal.Signals = signal.SIGTERM) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(how)
            self._process.wait(15)
        self._process = None

    @property
    def url(self) -> str:
        suffix = "/0" if self.kind == "redis" else ""
        return f"{self.kind}://127.0.0.1:{self.port}{suffix}"


def _wait_for_leader(port: int, timeout: float = 30.0) -> None:
    """A fresh etcd member opens its port before it has elected itself leader."""
    import httpx  # noqa: PLC0415 - only the etcd setup needs it

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reply = httpx.post(f"http://127.0.0.1:{port}/v3/kv/range", json={"key": "AA=="})
            if reply.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the private etcd on port {port} elected no leader in {timeout:g}s")


def session_pids(admin_url: str, client_ports: Iterable[int]) -> list[int]:
    """The PostgreSQL server processes of the sessions whose client port is in `client_ports`."""
    ports = sorted(set(client_ports))
    if not ports:
        return []
    with psycopg.connect(admin_url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE client_addr = '127.0.0.1' AND client_port = ANY(%s) "
            "AND pid <> pg_backend_pid()",
            (ports,),
        ).fetchall()
    return [int(pid) for (pid,) in rows]


def signal_processes(pids: Iterable[int], how: signal.Signals) -> int:
    """Send `how` to each of `pids` that still exists; how many got it."""
    sent = 0
    for pid in pids:
        try:
            os.kill(pid, how)
            sent += 1
        except ProcessLookupError:
            pass  # the session ended meanwhile
    return sent


def end_sessions(dialect: str, admin_url: str, client_ports: Iterable[int]) -> int:
    """End the server sessions whose client port is in `client_ports`; how many."""
    ports = sorted(set(client_ports))
    if not ports:
        return 0
    if dialect == "postgres":
        pids = session_pids(admin_url, ports)
        with psycopg.connect(admin_url, autocommit=True) as connection:
            rows = connection.execute(
                "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,)
            ).fetchall()
            return sum(1 for (ended,) in rows if ended)
    parts = urlsplit(admin_url)
    mysql = pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        autocommit=True,
    )
    ended = 0
    try:
        with mysql.cursor() as cursor:
            cursor.execute("SELECT CONNECTION_ID()")
            (own_id,) = cursor.fetchone() or (0,)
            cursor.execute("SELECT ID, HOST FROM information_schema.PROCESSLIST")
            wanted = {str(port) for port in ports}
            for session_id, host in cursor.fetchall():
                if str(host).rpartition(":")[2] in wanted and session_id != own_id:
                    try:
                        cursor.execute("KILL CONNECTION %s", (int(session_id),))
                        ended += 1
                    except pymysql.err.OperationalError:
                        pass  # it ended on its own meanwhile
    finally:
        mysql.close()
    return ended
