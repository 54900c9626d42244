"""The anchor store port: where `InitialDelayGate` keeps the first observation of a task.

An anchor store is a tiny key/value store with exactly the three atomic operations
the gate needs, so that any server which can hold a value can host it:

* `add`: write a value only if the key is absent (redis `SET NX`, memcached `add`,
  an `INSERT` that ignores duplicates). The first observer of a task wins; every
  later observer reads the winner's value back.
* `get`: read the value back.
* `replace`: compare-and-set, used once per release to re-arm the window.

`now()` is the clock anchors are written and compared with. A store answers with its
server's clock where that is one cheap round trip (so node clock skew does not move
the window), otherwise with this host's wall clock.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from firefly_scheduling.errors import FireflySchedulingError


class AnchorStoreError(FireflySchedulingError):
    """The anchor store could not be reached or answered with an error.

    The gate treats it as "admit, with a warning": a task that runs without its
    delay is a visible wrong, a task that never runs is an invisible one. The
    message names the store and a redacted address, never a password.
    """


@runtime_checkable
class AnchorStore(Protocol):
    """Atomic add-if-absent storage for initial-delay anchors."""

    @property
    def shared_across_processes(self) -> bool:
        """False when other processes cannot see the anchors (the memory store).

        A cron-driven host, a fresh process every minute, then never sees a window
        elapse.
        """
        ...

    def add(self, key: str, value: str) -> bool:
        """Store `value` under `key` unless the key exists; return whether it was written."""
        ...

    def get(self, key: str) -> str | None:
        """The value under `key`, or None when there is none."""
        ...

    def replace(self, key: str, expected: str, value: str) -> bool:
        """Set `key` to `value` only if it still holds `expected`; return whether it did."""
        ...

    def now(self) -> float:
        """Seconds since the epoch on the clock anchors are measured with."""
        ...

    def close(self) -> None:
        """Drop connections; safe to call twice."""
        ...
