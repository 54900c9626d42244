"""The keywords an engine's pool would hand the driver's `connect()`, read without a server.

Shared by the unit tests that check what the database adapter asks of a driver
(flags, timeouts): a `do_connect` listener records the keywords and stops the
connect before it reaches the network.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event


class _Captured(Exception):
    """Raised by the `do_connect` listener once it has the arguments: no server needed."""


def connect_arguments(engine: Any) -> dict[str, Any]:
    """The keywords the engine's pool would hand the driver's connect()."""
    captured: dict[str, Any] = {}

    def capture(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        captured.update(cparams)
        raise _Captured

    event.listen(engine, "do_connect", capture)
    with pytest.raises(_Captured):
        engine.connect()
    engine.dispose()
    return captured
