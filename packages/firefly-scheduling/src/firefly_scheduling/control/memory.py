# Generated from memory_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`MemoryControlStore`: control records in this process's memory (`memory://`).

For tests and single-process demos: instances given the same `memory://<name>` share
one table, as nodes of one process would; nothing survives the process, and other
processes see nothing, so a host never picks it by itself. Written once, for asyncio;
`memory.py` is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

from firefly_scheduling.control.process_tables import MUTEX, TABLES
from firefly_scheduling.control.records import RecordKind
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.errors import ConfigurationError

SCHEME = "memory://"


class MemoryControlStore(ControlStore):
    """Records in a dict per `memory://<name>`, shared by every instance of the process."""

    store_name = "memory"
    shared_across_processes = False
    driver_errors = ()

    _mutex = MUTEX

    def __init__(self, url: str = SCHEME) -> None:
        if not url.startswith(SCHEME):
            raise ConfigurationError(f"the memory control store takes {SCHEME}<name>, got {url!r}")
        name = url[len(SCHEME) :]
        super().__init__(target=f"process memory {name!r}")
        with self._mutex:
            self._table = TABLES.setdefault(name, {})

    def _put(self, kind: RecordKind, key: str, value: str) -> None:
        with self._mutex:
            self._table[kind, key] = value

    def _add(self, kind: RecordKind, key: str, value: str) -> bool:
        with self._mutex:
            if (kind, key) in self._table:
                return False
            self._table[kind, key] = value
            return True

    def _get(self, kind: RecordKind, key: str) -> str | None:
        with self._mutex:
            return self._table.get((kind, key))

    def _delete(self, kind: RecordKind, key: str) -> bool:
        with self._mutex:
            return self._table.pop((kind, key), None) is not None

    def _values(self, kind: RecordKind) -> list[str]:
        with self._mutex:
            return [value for (stored, _), value in self._table.items() if stored == kind]


def create_control_store(url: str) -> MemoryControlStore:
    """The control-store factory of the `memory` provider's descriptor, of this flavour."""
    return MemoryControlStore(url)
