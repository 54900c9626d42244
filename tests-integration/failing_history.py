"""A real run history whose end writes fail for a while, as the fault checker's
`history_finish` fault makes them: for the tests of what a node does when the end of
a run (or the close of a record whose body never ran) cannot be written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from firefly_scheduling.history import HistoryError
from firefly_scheduling_database.sql_history.store import SqlRunHistory


class EndWritesFail:
    """`inner`, whose end writes (`finish`, `record_run`) fail while `failing()` says so;
    every other call reaches it unchanged."""

    def __init__(self, inner: SqlRunHistory, failing: Callable[[], bool]) -> None:
        self._inner = inner
        self._failing = failing

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _refuse(self) -> None:
        if self._failing():
            raise HistoryError("the history's end writes fail for a while (injected)")

    def finish(self, *args: Any, **kwargs: Any) -> bool:
        self._refuse()
        return self._inner.finish(*args, **kwargs)

    def record_run(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse()
        return self._inner.record_run(*args, **kwargs)
