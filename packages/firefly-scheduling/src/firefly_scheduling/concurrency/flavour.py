"""`ASYNC`: the switch that `tools/async_to_sync.py` reads in asyncio sources.

An asyncio module writes what only its flavour needs as `if ASYNC: ... else: ...`;
its generated synchronous twin keeps the `else:` branch alone. mypy is told the
constant is always true (`always_true` in the root configuration), as it is here.
"""

from __future__ import annotations

from typing import Final

ASYNC: Final = True
