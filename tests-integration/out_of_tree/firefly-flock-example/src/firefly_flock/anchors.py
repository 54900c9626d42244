"""`FlockAnchorStore`: initial-delay anchors in files of the lock's directory.

With the `flock` lock provider and no `firefly.scheduling.initial-delay.store`, core
picks this store at the lock's URL, because the descriptor says so.
"""

from __future__ import annotations

from firefly_flock.files import Record, directory_of, locked_update
from firefly_scheduling.initial_delay.base import BaseAnchorStore


class FlockAnchorStore(BaseAnchorStore):
    """Anchors shared by the processes of one host, in `<dir>/anchors`."""

    store_name = "flock"
    shared_across_processes = True

    def __init__(self, url: str) -> None:
        self._directory = directory_of(url, what="anchor store") / "anchors"
        self._directory.mkdir(exist_ok=True)
        super().__init__(target=url.strip())

    def _add(self, key: str, value: str) -> bool:
        def add(record: Record | None) -> tuple[Record | None, bool]:
            return (record, False) if record is not None else ({"value": value}, True)

        return locked_update(self._directory, key, add)

    def _get(self, key: str) -> str | None:
        def read(record: Record | None) -> tuple[Record | None, str | None]:
            return record, None if record is None else str(record["value"])

        return locked_update(self._directory, key, read)

    def _replace(self, key: str, expected: str, value: str) -> bool:
        def swap(record: Record | None) -> tuple[Record | None, bool]:
            if record is None or record["value"] != expected:
                return record, False
            return {"value": value}, True

        return locked_update(self._directory, key, swap)
