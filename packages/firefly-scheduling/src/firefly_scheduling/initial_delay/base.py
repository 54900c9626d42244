"""`BaseAnchorStore`: what every anchor store shares, written once.

A store subclasses it and implements only its round trips (`_add`, `_get`,
`_replace`, optionally `_now` and `_close`). This class maps the gate's long keys
onto the server's key rules and translates the driver's errors into
`AnchorStoreError` with credentials scrubbed, exactly as `BaseLock` does for locks.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar, TypeVar

from firefly_scheduling.initial_delay.port import AnchorStoreError
from firefly_scheduling.locks.server_keys import ServerKeyScheme
from firefly_scheduling.urls.redaction import scrub

_T = TypeVar("_T")


class BaseAnchorStore(ABC):
    """Shared implementation of `AnchorStore`; subclasses supply the I/O."""

    store_name: ClassVar[str] = "anchor"
    shared_across_processes: ClassVar[bool] = True
    #: Driver exceptions that mean "the store failed"; translated to AnchorStoreError.
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError,)
    #: How keys become server keys; None keeps them as they are.
    key_scheme: ClassVar[ServerKeyScheme | None] = None

    def __init__(self, *, target: str = "", secrets: tuple[str, ...] = ()) -> None:
        # `target` is an already-redacted description of where the server is.
        self._target = target
        self._secrets = secrets

    def add(self, key: str, value: str) -> bool:
        return self._call("adding", key, lambda server_key: self._add(server_key, value))

    def get(self, key: str) -> str | None:
        return self._call("reading", key, self._get)

    def replace(self, key: str, expected: str, value: str) -> bool:
        return self._call(
            "replacing", key, lambda server_key: self._replace(server_key, expected, value)
        )

    def now(self) -> float:
        try:
            return self._now()
        except self.driver_errors as err:
            raise AnchorStoreError(
                f"{self.store_name} anchor store {self._target} failed while reading its "
                f"clock: {self._describe(err)}"
            ) from err

    def close(self) -> None:
        self._close()

    def server_key(self, key: str) -> str:
        """The key as stored on the server (hashed when the server cannot hold it as is)."""
        return key if self.key_scheme is None else self.key_scheme.key(key)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._target!r})"

    # -- hooks for subclasses ---------------------------------------------------

    @abstractmethod
    def _add(self, key: str, value: str) -> bool:
        """One atomic round trip: write `value` unless `key` exists."""

    @abstractmethod
    def _get(self, key: str) -> str | None:
        """Read `key`."""

    @abstractmethod
    def _replace(self, key: str, expected: str, value: str) -> bool:
        """Atomic compare-and-set."""

    def _now(self) -> float:
        """This host's wall clock; override with the server's clock where it is cheap."""
        return time.time()

    def _close(self) -> None:  # noqa: B027 - optional hook; the memory store holds no connection
        """Drop connections; the default has none."""

    # -- shared machinery ---------------------------------------------------------

    def _call(self, doing: str, key: str, operation: Callable[[str], _T]) -> _T:
        try:
            return operation(self.server_key(key))
        except self.driver_errors as err:
            raise AnchorStoreError(
                f"{self.store_name} anchor store {self._target} failed while {doing} "
                f"{key!r}: {self._describe(err)}"
            ) from err

    def _describe(self, err: BaseException) -> str:
        text = scrub(str(err), self._secrets) or "no detail"
        return f"{type(err).__name__}: {text}"
