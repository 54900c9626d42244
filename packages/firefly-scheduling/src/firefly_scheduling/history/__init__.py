"""Run history: one record per fire (port, base class, memory store, store selection)."""

from __future__ import annotations

from firefly_scheduling.history.base import BaseRunHistory, RunEnd, RunStart
from firefly_scheduling.history.memory import MemoryRunHistory
from firefly_scheduling.history.port import (
    HistoryError,
    Recorded,
    RunHistory,
    RunRecord,
    RunState,
)
from firefly_scheduling.history.selection import history_url, require_history, resolve_history

__all__ = [
    "BaseRunHistory",
    "HistoryError",
    "MemoryRunHistory",
    "Recorded",
    "RunEnd",
    "RunHistory",
    "RunRecord",
    "RunStart",
    "RunState",
    "history_url",
    "require_history",
    "resolve_history",
]
