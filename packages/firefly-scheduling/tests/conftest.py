"""Shared by the core's unit tests: every test leaves the process's signal handlers as it
found them, the CLI tests run in an empty directory (`isolated`), and a run that timed
out can be written into a SQL history (`timed_out_run`).

`run` and `tick` invoked in-process (click's runner) install SIGTERM/SIGINT handlers
and, once stopped, ignore both signals, as a host process about to exit should. In
the test process that would outlive the test: a later test's child processes would
inherit the ignored signals and could no longer be terminated.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@pytest.fixture(autouse=True)
def _restore_stop_signals() -> Iterator[None]:
    saved = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


#: The variables that would point a CLI test at an app outside its own directory.
NOTHING_CONFIGURED = {"FIREFLY_SCAN_PACKAGES": "", "FIREFLY_SCHEDULING_MANIFEST": ""}


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty directory, restoring the import path afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for variable in NOTHING_CONFIGURED:
        monkeypatch.delenv(variable, raising=False)
    return tmp_path


#: Writes a locked run of `target` (its own lock name) at `instant` that timed out after
#: 30 s into the SQL history at `url`.
WriteTimedOutRun = Callable[[str, str, datetime], None]


@pytest.fixture
def timed_out_run() -> WriteTimedOutRun:
    """How the history's readers (`runs`, the Django admin) are given a timed-out run."""
    pytest.importorskip("firefly_scheduling_database")
    from firefly_scheduling.history import RunState  # noqa: PLC0415 - after the skip
    from firefly_scheduling_database.sql_history.store import SqlRunHistory  # noqa: PLC0415

    def write(url: str, target: str, instant: datetime) -> None:
        history = SqlRunHistory(url)
        try:
            history.install()
            history.start(target, instant, lock=target, node="n1", token=7, at=instant)
            assert history.finish(
                target,
                instant,
                lock=target,
                token=7,
                state=RunState.TIMED_OUT,
                error="timed out after 30s",
                at=instant,
            )
        finally:
            history.close()

    return write


@pytest.fixture
def caught_up_run() -> WriteTimedOutRun:
    """How the history's readers (`runs`, the Django admin) are given a caught-up run:
    a missed fire run late under `catchup=`, written as its node writes it."""
    pytest.importorskip("firefly_scheduling_database")
    from firefly_scheduling.history import RunState  # noqa: PLC0415 - after the skip
    from firefly_scheduling_database.sql_history.store import SqlRunHistory  # noqa: PLC0415

    reason = "caught up: missed while the fleet was down; ran 5400.000s late, within catchup=6h"

    def write(url: str, target: str, instant: datetime) -> None:
        history = SqlRunHistory(url)
        try:
            history.install()
            history.start(target, instant, lock=target, node="n1", token=3, at=instant)
            assert history.finish(
                target,
                instant,
                lock=target,
                token=3,
                state=RunState.CAUGHT_UP,
                error=reason,
                at=instant,
            )
        finally:
            history.close()

    return write
