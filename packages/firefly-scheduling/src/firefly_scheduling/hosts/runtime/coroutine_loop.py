"""`CoroutineLoop`: one event loop in a thread of its own, for `async def` tasks on sync hosts.

The resident host (`run`), the cron-driven host (`tick`) and the library host on a
threaded APScheduler run bodies in worker threads. An `async def` body there is
handed to this loop and its worker thread waits for it, so the fire runner around
the body (claim, task lock, keep-alive, fencing, history) is the same code as for a
sync body, and the body runs to completion before the fire's verdict is taken.

One loop per host, not one per fire: a coroutine task may keep loop-bound state
between fires (a client, a connection pool), which `asyncio.run` per fire would
break on the second fire. The loop's thread is started on the first coroutine, so a
host without async tasks never starts it.

The fire's context variables travel with the coroutine (`current_fire()` works in
it): `run_coroutine_threadsafe` schedules it with a copy of the calling thread's
context.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

logger = logging.getLogger("firefly_scheduling.hosts")

_T = TypeVar("_T")

#: Longest `close()` waits for the loop's thread to end.
CLOSE_TIMEOUT_SECONDS = 5.0


class CoroutineLoop:
    """Runs coroutines to completion on one private event loop thread; thread-safe."""

    def __init__(self, name: str = "firefly-asyncio") -> None:
        self._name = name
        self._mutex = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._closed = False

    @property
    def started(self) -> bool:
        return self._loop is not None

    def run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        """Run `coroutine` on the loop and wait for its end; its exception is raised here."""
        try:
            loop = self._started_loop()
        except BaseException:
            coroutine.close()  # never leave it un-awaited with a warning
            raise
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    def close(self) -> None:
        """Stop the loop and join its thread; coroutines still running are abandoned."""
        with self._mutex:
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(CLOSE_TIMEOUT_SECONDS)
        if thread.is_alive():
            logger.warning("the task event loop did not stop within %.1f s", CLOSE_TIMEOUT_SECONDS)
            return
        loop.close()

    def _started_loop(self) -> asyncio.AbstractEventLoop:
        with self._mutex:
            if self._closed:
                raise RuntimeError("the host's event loop is closed: it is shutting down")
            if self._pid != os.getpid():  # a forked child: the loop's thread stayed behind
                self._loop, self._thread, self._pid = None, None, os.getpid()
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=_serve, args=(loop, ready), name=self._name, daemon=True
                )
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()
