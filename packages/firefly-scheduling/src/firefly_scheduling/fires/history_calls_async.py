"""How the fire stages call the run history: off the event loop.

Written once, for asyncio, in `fires/history_calls_async.py`; `fires/history_calls.py`
is generated from it by `tools/async_to_sync.py`. The run history is synchronous
(its stores block on I/O): the asyncio flavour calls it in a worker thread, so a slow
history never stalls the loop; the synchronous flavour already runs off any loop.
"""

from __future__ import annotations

import asyncio  # sync: drop
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop

_T = TypeVar("_T")
_P = ParamSpec("_P")

if ASYNC:

    async def off_loop(call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """`call(*args, **kwargs)` in a worker thread: the run history's I/O is blocking."""
        return await asyncio.to_thread(call, *args, **kwargs)

else:

    def off_loop(call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """`call(*args, **kwargs)`: the synchronous runner already runs off any loop."""
        return call(*args, **kwargs)
