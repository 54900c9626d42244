"""`MemoryAnchorStore`: anchors in this process's memory."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import ClassVar

from firefly_scheduling.initial_delay.base import BaseAnchorStore


class MemoryAnchorStore(BaseAnchorStore):
    """Anchors kept in a dict, shared by every instance in the process.

    Enough for the resident host, which is one long-lived process: the window is
    measured from the first time this process saw the task. Useless under the
    cron-driven host, where each process lives a minute: every process re-anchors at
    its own start and the window never elapses, so `tick` warns as it builds.
    `clock` is the seam tests use instead of sleeping.
    """

    store_name = "memory"
    shared_across_processes = False
    driver_errors = ()

    _process_table: ClassVar[dict[str, str]] = {}
    _process_mutex: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        table: dict[str, str] | None = None,
    ) -> None:
        super().__init__(target="process memory")
        self._clock = clock
        self._table = self._process_table if table is None else table
        self._mutex = self._process_mutex if table is None else threading.Lock()

    def _add(self, key: str, value: str) -> bool:
        with self._mutex:
            if key in self._table:
                return False
            self._table[key] = value
            return True

    def _get(self, key: str) -> str | None:
        with self._mutex:
            return self._table.get(key)

    def _replace(self, key: str, expected: str, value: str) -> bool:
        with self._mutex:
            if self._table.get(key) != expected:
                return False
            self._table[key] = value
            return True

    def _now(self) -> float:
        return self._clock()
