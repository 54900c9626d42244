"""MemoryRunHistory against the shared run-history contract."""

from __future__ import annotations

import pytest

from firefly_scheduling.history import MemoryRunHistory
from firefly_scheduling.testing.history_contract import RunHistoryContract


class TestMemoryRunHistory(RunHistoryContract):
    @pytest.fixture
    def history(self) -> MemoryRunHistory:
        return MemoryRunHistory()
