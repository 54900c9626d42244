"""Both flavours of one lock side by side, as a fleet mixing sync and async nodes has them.

`run_both_flavours` runs a scenario on a fresh event loop with a synchronous lock
(driven from threads, as the asyncio code around it would) and an asyncio lock, and
closes both whatever the scenario did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar


class _Closing(Protocol):
    def close(self) -> None: ...


class _AsyncClosing(Protocol):
    async def aclose(self) -> None: ...


SyncLock = TypeVar("SyncLock", bound=_Closing)
AsyncLock = TypeVar("AsyncLock", bound=_AsyncClosing)


def run_both_flavours(
    sync_lock: SyncLock,
    async_lock: AsyncLock,
    scenario: Callable[[SyncLock, AsyncLock], Awaitable[None]],
) -> None:
    """`scenario(sync_lock, async_lock)` on a fresh event loop; both locks closed after."""

    async def run() -> None:
        try:
            await scenario(sync_lock, async_lock)
        finally:
            await async_lock.aclose()
            await asyncio.to_thread(sync_lock.close)

    asyncio.run(run())
