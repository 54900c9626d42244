"""One measured case of `benchmarks/locks.py`, and what every case shares.

A case is a backend's acquire+release cycle in one role: our adapter, the raw
driver's floor, or a peer library. The server URLs come from the `FIREFLY_TEST_*_URL`
variables (defaults: the local servers). tooz, a peer on four backends, is here.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

Cycle = Callable[[], None]


@dataclass
class Case:
    backend: str
    label: str
    role: str  # "adapter", "floor" or "peer"
    cycle: Cycle
    samples: list[float] = field(default_factory=list)


def url(backend: str, default: str) -> str:
    return os.environ.get(f"FIREFLY_TEST_{backend.upper()}_URL", default)


POSTGRES = url("postgres", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL = url("mysql", "mysql://root@127.0.0.1:3306/test")
REDIS = url("redis", "redis://127.0.0.1:6379/0")
MEMCACHED = url("memcached", "memcached://127.0.0.1:11211")
ETCD = url("etcd", "etcd://127.0.0.1:2379")


def lock_cycle(lock: Any, name: str, ttl: float = 30.0) -> Cycle:
    """One cycle of any DistributedLock: acquire (must win) then release."""

    def cycle() -> None:
        if not lock.try_acquire(name, ttl):
            raise RuntimeError(f"{lock!r} did not win uncontended {name!r}")
        lock.release(name)

    return cycle


def require(condition: bool, message: str) -> None:
    """A benchmark that silently measures a failing cycle would report nonsense."""
    if not condition:
        raise RuntimeError(message)


def unique(prefix: str) -> str:
    return f"bench:{prefix}:{uuid.uuid4().hex[:8]}"


# -- tooz -----------------------------------------------------------------------------------


def tooz_case(stack: ExitStack, backend: str, server_url: str) -> Iterator[Case]:
    try:
        from tooz import coordination  # noqa: PLC0415
    except ImportError:
        return
    tooz_url = {
        "postgres": server_url,
        "mysql": server_url,
        "redis": server_url.removesuffix("/0"),
        "memcached": server_url,
    }[backend]
    coordinator = coordination.get_coordinator(tooz_url, f"bench-{uuid.uuid4().hex[:6]}".encode())
    coordinator.start()
    stack.callback(coordinator.stop)
    tooz_lock = coordinator.get_lock(unique("tooz").encode())

    def cycle() -> None:
        require(bool(tooz_lock.acquire(blocking=False)), "uncontended cycle failed")
        tooz_lock.release()

    yield Case(backend, f"tooz {backend} driver", "peer", cycle)
