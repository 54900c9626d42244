"""The servers `benchmarks/fire_cost.py` measures a node on, and the node's provider.

Where it can, the script starts a private redis-server or memcached: their command
counters are then the node's (and the hog's) alone, so a fire's round trips are
counted exactly. Elsewhere the node uses the shared server of `FIREFLY_TEST_*_URL`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
    from fleet_backends import backend_env, migrate  # noqa: PLC0415 - the same table as the fleet

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
