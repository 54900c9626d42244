# async-to-sync: rename AsyncCancelWatch CancelWatch
"""`cancel_other`: the running fire learns, through the backend, that a newer one waits.

Written once, for asyncio, in `fires/cancel_watch_async.py`; `fires/cancel_watch.py`
is generated from it by `tools/async_to_sync.py`.

A newer fire of an `overlap="cancel_other"` task that finds the task lock held
takes the task's waiting slot (`fires.overlap_wait`) and waits for the lock. That
slot held **is** the request to stop: it is an ordinary lock on the task lock's own
backend, so it reaches the running body on any node, through any backend, with
nothing the lock port lacks. While the body runs, this watch tries the slot every
`interval` seconds (a third of `lock_ttl` by default, the keep-alive's pace): taken,
nobody asks and it is given back at once; refused, a newer fire waits, so the run's
`cancel_requested` is set and `on_request` called (the asyncio flavour cancels a
coroutine body there). A try that fails (the backend is unreachable) is logged and
tried again at the next interval: an outage never cancels a run.

The asyncio flavour is one task on the body's loop; the synchronous one a daemon
thread per watched run (only runs of `cancel_other` tasks are watched).
"""

from __future__ import annotations

import asyncio  # sync: drop
import logging
import threading
from collections.abc import Callable

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.port import AsyncHoldingLock

logger = logging.getLogger("firefly_scheduling.fires")

#: How long a stopping watch waits for a try already on the wire.
STOP_SECONDS = 5.0


class AsyncCancelWatch:
    """Tries `slot` on `holdings` every `interval` seconds until stopped; sets
    `requested` (and calls `on_request`, once) when a newer fire holds it."""

    def __init__(
        self,
        holdings: AsyncHoldingLock,
        slot: str,
        *,
        interval: float,
        requested: threading.Event,
        on_request: Callable[[], object] | None = None,
        label: str,
    ) -> None:
        self._holdings = holdings
        self._slot = slot
        self._interval = interval
        self._requested = requested
        self._on_request = on_request
        self._label = label
        self._stopped = threading.Event()
        self._task: asyncio.Task[None] | None = None  # sync: drop
        self._thread: threading.Thread | None = None

    def start(self) -> AsyncCancelWatch:
        name = f"firefly-cancel {self._label}"
        if ASYNC:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=name)
        else:
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()
        return self

    async def stop(self) -> None:
        """Stop watching; a try on the wire is let finish (at most `STOP_SECONDS`)."""
        self._stopped.set()
        if ASYNC:
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
        else:
            thread = self._thread
            if thread is not None:
                thread.join(STOP_SECONDS)

    async def _run(self) -> None:
        while not self._stopped.is_set():
            await asyncio.sleep(self._interval)  # sync: self._stopped.wait(self._interval)
            if self._stopped.is_set():
                return
            if await self._asked():
                logger.warning(
                    "%s: a newer fire asked this run to stop (overlap='cancel_other')",
                    self._label,
                )
                self._requested.set()
                if self._on_request is not None:
                    self._on_request()
                return

    async def _asked(self) -> bool:
        """Whether a newer fire holds the slot (tried, and given back when taken)."""
        try:
            probe = await self._holdings.acquire(self._slot, self._interval * 3)
            if probe is None:
                return True
            await self._holdings.release_holding(probe)
        except LockBackendError as err:
            logger.warning("%s: the cancel request could not be read: %s", self._label, err)
        return False
