"""`wait_for_backend`: a host starts only once its lock backend answers, or refuses.

A host used to boot on a lock server that did not answer, then skip every fire with
a warning, forever. Now it asks the backend first: once, then again with a capped
backoff for up to `seconds` (`firefly.scheduling.wait-for-backend`, 30 s by default),
then refuses with `BackendUnavailable` (exit 3). A backend that answers with a
refusal (a missing table, a wrong password: a `ConfigurationError`) is refused at
once, since waiting cannot fix it. The bound is `seconds` plus the one attempt under
way, itself bounded by the driver's timeouts.

One probe is one fire claim on `PROBE_NAME` for `PROBE_SECONDS`: the very round trip
every fire starts with, so a backend that answers it can claim fires. A claim is
never released, only left to expire; every node probes the same name, so a probe
leaves at most one short-lived entry behind, and a claim another node holds is an
answer too. A lock that excludes nothing across processes (`none`, `memory`) has
no backend to ask.

Written once, for asyncio, in `hosts/runtime/probe_async.py`; the synchronous flavour in
`hosts/runtime/probe.py` is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

import asyncio  # sync: drop
import logging
import time
from collections.abc import Awaitable, Callable

from firefly_scheduling.errors import BackendUnavailable, LockBackendError
from firefly_scheduling.locks.port import AsyncDistributedLock, capabilities_of
from firefly_scheduling.locks.port_holdings_async import async_claiming_lock

logger = logging.getLogger("firefly_scheduling.hosts")

#: The claim every probe takes, in firefly's reserved namespace.
PROBE_NAME = "firefly:probe"
#: How long a probe's claim lives on the server.
PROBE_SECONDS = 1.0
#: The first pause between two attempts, doubled after each, up to `LONGEST_PAUSE`.
FIRST_PAUSE = 0.5
LONGEST_PAUSE = 5.0
#: How the wait pauses between attempts (a seam for tests).
Sleep = Callable[[float], Awaitable[None]]  # sync: Sleep = Callable[[float], None]
#: Where the wait is configured, for messages.
WAIT_SOURCE = "--wait-for-backend SECONDS (FIREFLY_SCHEDULING_WAIT_FOR_BACKEND)"


async def probe_backend(lock: AsyncDistributedLock) -> None:
    """Ask the backend once; `LockBackendError` if it did not answer.

    A `ConfigurationError` when it answered with a refusal an operator must fix.
    """
    if not capabilities_of(lock).cross_process:
        return
    await async_claiming_lock(lock).try_claim(PROBE_NAME, PROBE_SECONDS)


async def wait_for_backend(
    lock: AsyncDistributedLock,
    *,
    seconds: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Sleep = asyncio.sleep,
) -> None:
    """Return once `lock`'s backend answers; `BackendUnavailable` after `seconds` without.

    `clock` and `sleep` are seams for tests.
    """
    pause = FIRST_PAUSE
    deadline = clock() + max(seconds, 0.0)
    attempts = 0
    while True:
        attempts += 1
        try:
            await probe_backend(lock)
        except LockBackendError as err:
            remaining = deadline - clock()
            if remaining <= 0:
                raise BackendUnavailable(
                    f"the lock backend did not answer within {seconds:g}s "
                    f"({attempts} attempt(s)); check that the server is up and reachable "
                    f"from this node, or wait longer with {WAIT_SOURCE}. The last error: {err}"
                ) from err
            logger.warning(
                "the lock backend does not answer yet (%s); trying again for up to %.1f s",
                err,
                remaining,
            )
            await sleep(min(pause, remaining))
            pause = min(pause * 2, LONGEST_PAUSE)
            continue
        if attempts > 1:
            logger.info("the lock backend answers (attempt %d)", attempts)
        return
