"""Code run in child processes by the waiting and leadership contract cases.

Importable, so a child can find it. Each worker writes what it sees to a log file
shared with the test, one line per event, stamped with the kernel's monotonic clock
(the same clock in every process of the machine), so the test reads the election
from the processes' own reports and from signals it sends them, never from the
code under test's view of itself.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from firefly_scheduling.testing.workers import default_stop_signals


def log_event(path: str, event: str) -> None:
    """Append `<event> <pid> <monotonic>` to `path` in one write (atomic under O_APPEND)."""
    line = f"{event} {os.getpid()} {time.monotonic():.6f}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_events(path: str) -> list[tuple[str, int, float]]:
    """The events logged so far: (event, pid, monotonic instant), in order."""
    events = []
    for line in Path(path).read_text().splitlines():
        event, pid, at = line.split()
        events.append((event, int(pid), float(at)))
    return events


def campaign(
    factory: Callable[[], Any], name: str, ttl: float, log: str, asynchronous: bool
) -> None:
    """Campaign for `name` for ever; log `won` on taking the lead, `lost` on losing it."""
    default_stop_signals()
    if asynchronous:
        asyncio.run(_campaign_async(factory, name, ttl, log))
        return
    from firefly_scheduling.locks.leadership import leadership  # noqa: PLC0415 - in the child

    lock = factory()
    while True:
        with leadership(lock, name, ttl) as lead:
            log_event(log, "won")
            while not lead.wait_lost(0.05):
                pass
            log_event(log, "lost")


async def _campaign_async(factory: Callable[[], Any], name: str, ttl: float, log: str) -> None:
    from firefly_scheduling.locks.leadership_async import async_leadership  # noqa: PLC0415

    lock = factory()
    while True:
        async with async_leadership(lock, name, ttl) as lead:
            log_event(log, "won")
            await lead.wait_lost()
            log_event(log, "lost")


def interrupted_waiter(factory: Callable[[], Any], name: str, log: str) -> None:
    """Wait for `name` in the main thread until SIGINT interrupts it; log what happened."""
    default_stop_signals()
    lock = factory()
    log_event(log, "waiting")
    try:
        holding = lock.acquire(name, 30, wait=60)
    except KeyboardInterrupt:
        log_event(log, "interrupted")
        time.sleep(0.5)  # the session stays open: the server must hold nothing for it
        log_event(log, "exiting")
        return
    log_event(log, "won" if holding is not None else "timed-out")


def queued_waiter(
    factory: Callable[[], Any],
    name: str,
    log: str,
    asynchronous: bool = False,
    fenced: bool = True,
) -> None:
    """Wait for `name` (fenced unless told not); once won, log `won:<token>` while
    holding it (`won:None` unfenced), then let go.

    Lines are logged only while the lock is held, so their order in the log is the
    order in which the waiters were served.
    """
    default_stop_signals()
    if asynchronous:
        asyncio.run(_queued_waiter_async(factory, name, log, fenced))
        return
    lock = factory()
    holding = lock.acquire(name, 60, wait=120, fenced=fenced)
    if holding is None:
        log_event(log, "timed-out")
        return
    log_event(log, f"won:{holding.fence}")
    lock.release_holding(holding)
    lock.close()


async def _queued_waiter_async(
    factory: Callable[[], Any], name: str, log: str, fenced: bool
) -> None:
    lock = factory()
    holding = await lock.acquire(name, 60, wait=120, fenced=fenced)
    if holding is None:
        log_event(log, "timed-out")
        return
    log_event(log, f"won:{holding.fence}")
    await lock.release_holding(holding)
    await lock.aclose()
