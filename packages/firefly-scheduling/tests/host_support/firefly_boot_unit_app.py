"""A method task whose class needs an argument: no host can build it without a resolver."""

from __future__ import annotations

from firefly_scheduling import scheduled


class NeedsDatabase:
    def __init__(self, db: object) -> None:
        self.db = db

    @scheduled(cron="* * * * *", lock=True)
    def work(self) -> None:
        """Never reached when the object cannot be built."""
