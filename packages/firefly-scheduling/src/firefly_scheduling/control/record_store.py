# Generated from record_store_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`RecordStore`: the six round trips a control-store adapter implements.

Written once, for asyncio; `record_store.py` is generated from it by
`tools/async_to_sync.py`. `AsyncControlStore` (`store_async`) holds the rules of
every operation on top of these; an adapter (SQL, Redis, etcd, process memory)
subclasses it and supplies `_put`, `_add`, `_get`, `_delete`, `_values` and
`_now`, each atomic on its server, on one namespace per record kind. A driver's
failure becomes a `ControlStoreError` that names the store and a redacted address,
never a password (`_call`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar, TypeAlias, TypeVar

from firefly_scheduling.control.records import ControlStoreError, RecordKind
from firefly_scheduling.urls.redaction import scrub

_T = TypeVar("_T")

_Operation: TypeAlias = Callable[[], _T]


class RecordStore(ABC):
    """Opaque records under opaque keys, one namespace per kind; subclasses do the I/O."""

    #: How messages name the store ("redis", "database", ...).
    store_name: ClassVar[str] = "control"
    #: Whether other processes see the records (False for process memory).
    shared_across_processes: ClassVar[bool] = True
    #: Driver exceptions that mean "the store failed"; translated to `ControlStoreError`.
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError,)

    def __init__(self, *, target: str = "", secrets: tuple[str, ...] = ()) -> None:
        # `target` is an already-redacted description of where the server is.
        self._target = target
        self._secrets = secrets

    # -- clock and lifetime -------------------------------------------------------------

    def now(self) -> float:
        """Seconds since the epoch on the store's clock (the server's where it has one)."""
        return self._call("reading the clock of", "the store", self._now)

    def close(self) -> None:
        """Drop connections; safe to call twice."""
        self._close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._target!r})"

    # -- hooks for subclasses -------------------------------------------------------------

    @abstractmethod
    def _put(self, kind: RecordKind, key: str, value: str) -> None:
        """Write `value` under `key`, replacing any."""

    @abstractmethod
    def _add(self, kind: RecordKind, key: str, value: str) -> bool:
        """Write `value` unless `key` exists; whether it was written (one atomic step)."""

    @abstractmethod
    def _get(self, kind: RecordKind, key: str) -> str | None:
        """The value under `key`, or None."""

    @abstractmethod
    def _delete(self, kind: RecordKind, key: str) -> bool:
        """Remove `key`; True to exactly one of any number of racing callers."""

    @abstractmethod
    def _values(self, kind: RecordKind) -> list[str]:
        """Every value of `kind`, in any order."""

    def _now(self) -> float:
        """This host's wall clock; override with the server's where it is one round trip."""
        return time.time()

    def _close(self) -> None:  # noqa: B027 - optional hook; process memory holds nothing
        """Drop connections; the default has none."""

    # -- shared machinery -------------------------------------------------------------------

    def _call(self, doing: str, subject: str, operation: _Operation[_T]) -> _T:
        try:
            return operation()
        except self.driver_errors as err:
            detail = scrub(str(err), self._secrets) or "no detail"
            raise ControlStoreError(
                f"{self.store_name} control store {self._target} failed while {doing} "
                f"{subject!r}: {type(err).__name__}: {detail}"
            ) from err
