"""`KeepAlive`: renew a held lock while a task body runs.

A lease shorter than the task would let a second node start while the first still
runs; a lease as long as the longest imaginable run would keep a died node's task
blocked for as long. So the lease stays short (`lock_ttl`) and a daemon thread
renews it every `lock_ttl / 3` while the body runs: two renewals may fail or be
late before the lease can lapse.

On a session backend (PostgreSQL, MySQL) the TTL means nothing; the same call asks
the server whether the session still holds the lock, which is how a killed session
(`pg_terminate_backend`, a failover) is noticed while the body runs.

A renewal that fails marks the hold lost for good: `BaseLock` records it, this
class logs it with the task's name, sets the `lost` event the body sees through
`current_fire().lost`, and stops renewing. Nothing interrupts the body: Python
cannot stop a thread safely, and only the body knows whether stopping halfway is
better than finishing. Its history write is then fenced if another node adopted
the fire meanwhile.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from firefly_scheduling.locks.base import BaseLock

logger = logging.getLogger("firefly_scheduling.fires")

#: Renewals per lease: the lease survives `RENEWALS_PER_TTL - 1` failed or late ones.
RENEWALS_PER_TTL = 3


class KeepAlive:
    """Renews `name` on `lock` every `interval` seconds until `stop()`.

    Use it as a context manager around the body. `interval` defaults to
    `ttl_seconds / 3`. `lost` is the event set when a renewal fails; pass your own to
    share it (the fire's context holds it).
    """

    def __init__(
        self,
        lock: BaseLock,
        name: str,
        ttl_seconds: float,
        *,
        interval: float | None = None,
        lost: threading.Event | None = None,
        label: str = "",
    ) -> None:
        self._lock = lock
        self._name = name
        self._ttl = ttl_seconds
        self._interval = ttl_seconds / RENEWALS_PER_TTL if interval is None else interval
        if not self._interval > 0:
            raise ValueError(f"keep-alive interval must be > 0, got {interval!r}")
        self.lost = threading.Event() if lost is None else lost
        self._label = label or name
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._renew_until_stopped, name=f"firefly-keepalive:{name}", daemon=True
        )

    def start(self) -> KeepAlive:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop renewing and wait for an in-flight renewal (bounded by the backend's timeouts).

        Call it before releasing the lock: a renewal racing a release would report the
        released lock as lost.
        """
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def __enter__(self) -> KeepAlive:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _renew_until_stopped(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                kept = self._lock.renew(self._name, self._ttl)
            except Exception:  # a bug in a backend must not kill the fire silently
                logger.exception("%s: renewing the lock %r raised", self._label, self._name)
                kept = False
            if not kept:
                self.lost.set()
                logger.error(
                    "%s: the lock %r is lost while the body runs; another node may start "
                    "this task meanwhile, and writes of this run will be fenced if it does",
                    self._label,
                    self._name,
                )
                return


def supports_renewal(lock: BaseLock) -> bool:
    """Whether `lock`'s backend implements renewal (the `_renew` hook is overridden)."""
    return type(lock)._renew is not BaseLock._renew
