"""`AsyncKeepAlive`: renew a held task lock while an awaited body runs, from one task.

The asyncio flavour of `locks.keepalive`, with the same rules (renew every
`lock_ttl / 3`, retry a failed renewal half an interval later, mark the holding lost
when the server refuses or the lease lapsed, even with a renewal still in flight,
never interrupt the body) and the same
judgement of each renewal (`judge_renewal`). What differs is the mechanism: an
asyncio task per keep-alive costs a few hundred bytes and no thread, so the shared
renewer thread of the synchronous flavour (one heap for every holding) has no
reason to exist here; each task just sleeps until its next renewal.
"""

from __future__ import annotations

import asyncio
import logging

from firefly_scheduling.locks.keepalive import (
    LAPSED_UNANSWERED,
    STOP_TIMEOUT_SECONDS,
    Watched,
    judge_renewal,
    report_lost,
)
from firefly_scheduling.locks.port import AsyncHoldingLock

logger = logging.getLogger("firefly_scheduling.locks.keepalive")


class AsyncKeepAlive(Watched[AsyncHoldingLock]):
    """Renews `holding` on `lock` every `interval` seconds until `await stop()`.

    `start()` must be called on the running loop; the arguments are `Watched`'s.
    """

    _task: asyncio.Task[None] | None = None

    def start(self) -> AsyncKeepAlive:
        self.stopped = False
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"firefly-keepalive {self.label}"
        )
        return self

    async def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """Stop renewing; wait (at most `timeout` s) for a renewal already in flight.

        Call it before releasing the holding: a renewal racing a release would report
        the released lock as lost. A sleeping keep-alive is cancelled at once; one in
        the middle of a renewal is let finish it, so the holding's state stays true.
        """
        self.stopped = True
        task = self._task
        if task is None or task.done():
            return
        if self.renewing:
            await asyncio.wait({task}, timeout=max(timeout, 0.0))
            if not task.done():
                logger.warning(
                    "%s: a renewal of the lock %r is still in flight after %.1f s",
                    self.label,
                    self.holding.name,
                    timeout,
                )
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        delay = self.interval
        while True:
            await asyncio.sleep(delay)
            if self.stopped:
                return
            self.renewing = True
            try:
                renewed = await self._renewal()
            except Exception:  # a bug in a backend must not end the keep-alive silently
                logger.exception("%s: renewing the lock %r raised", self.label, self.holding.name)
                renewed = False
            finally:
                self.renewing = False
            verdict = judge_renewal(self, renewed)
            if verdict is None:
                return
            delay = self.interval if verdict else self.interval / 2

    async def _renewal(self) -> bool:
        """One renewal; its lease, where the server ends it by itself, is reported lost
        the moment it passes with the renewal still in flight (`LAPSED_UNANSWERED`).

        The renewal is awaited here, in this task, as before the watch: its holder sees
        a refusal judged in the same step that marked the holding lost."""
        renewal = self.lock.renew_holding(self.holding, self.ttl_seconds)
        if not self.lapses:
            return await renewal
        loop = asyncio.get_running_loop()
        watch = loop.call_later(max(self.holding.remaining(), 0.0), self._lapsed_unanswered)
        try:
            return await renewal
        finally:
            watch.cancel()

    def _lapsed_unanswered(self) -> None:
        if self.holding.lapsed():
            report_lost(self, LAPSED_UNANSWERED)
